"""The Ascend half of the apex.amp helpers (see apex_amp.py): torch_npu's GradScaler, "npu" autocast."""

import torch
import torch_npu  # noqa: F401  registers torch.npu


def _migrate_amp_scaler(enabled):
    """Apex's dynamic loss scaling (initial scale 2**16) on Ascend. Added by ascend-migrate."""
    return torch.npu.amp.GradScaler(init_scale=2.0**16, enabled=enabled)


def _migrate_amp_device_type():
    """The device type the loss scaler works on. Added by ascend-migrate."""
    return "npu"
