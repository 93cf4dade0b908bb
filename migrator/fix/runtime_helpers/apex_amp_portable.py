"""The portable half of the apex.amp helpers (see apex_amp.py): the current accelerator's GradScaler."""

import torch

from migrator.fix.runtime_helpers.device import _migrate_device


def _migrate_amp_scaler(enabled):
    """Apex's dynamic loss scaling (initial scale 2**16) on this process's device. Added by ascend-migrate."""
    return torch.amp.GradScaler(_migrate_device().type, init_scale=2.0**16, enabled=enabled)


def _migrate_amp_device_type():
    """The device type the loss scaler works on. Added by ascend-migrate."""
    return _migrate_device().type
