"""The helpers a fix emits once per file, by the names the transforms use.

Their source lives in `migrator/fix/runtime_helpers/` as real modules (linted and tested there); these
are the exact texts of their definitions (`migrator.fix.helper_source`). Each helper is named
`_migrate_<what>`, documents what it replaces, and carries the semantics that would otherwise be
repeated at every call site (scale defaults, mask polarity, causal alignment). For the portable
target the device helpers come from the tree's `_migrate_runtime.py` instead (`fix/runtime_module.py`).
"""

from __future__ import annotations

from migrator.fix.helper_source import definitions
from migrator.ground.kinds import Target

DEVICE_HELPER = definitions("device", "_migrate_device")
ACCELERATOR_TYPE_HELPER = definitions("device", "_migrate_accelerator_type")
BACKEND_HELPER = definitions("device", "_migrate_backend")
DEVICE_MODULE_HELPER = definitions("device", "_migrate_device_module", "_MigrateCpuRuntime", "_MIGRATE_CPU_RUNTIME")

FLASH_ATTN_NPU = definitions("flash_attn_npu", "_migrate_flash_attn")
FLASH_ATTN_VARLEN_NPU = definitions("flash_attn_npu", "_migrate_flash_attn_varlen")
FLASH_ATTN_PORTABLE = definitions("flash_attn_portable", "_migrate_flash_attn")
FLASH_ATTN_VARLEN_PORTABLE = definitions("flash_attn_portable", "_migrate_flash_attn_varlen")

RMS_NORM_NPU = definitions("rms_norm_npu", "_MigrateRMSNorm")

_AMP_SHARED = definitions("apex_amp", "_migrate_amp_initialize", "_migrate_skipping_step", "_migrate_amp_scale_loss")


def apex_amp_helpers(target: str) -> str:
    """amp.initialize / amp.scale_loss and the target's scaler and autocast device type."""
    variant = "apex_amp_npu" if target == Target.NPU else "apex_amp_portable"
    return _AMP_SHARED + "\n\n" + definitions(variant, "_migrate_amp_scaler", "_migrate_amp_device_type")
