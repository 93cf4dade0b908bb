"""`--device npu|cuda|cpu` for `--record` / `--compare`: which device the side that runs here uses, chosen
or refused before any child starts. `--record` runs the original (CUDA) program: cuda or cpu; `--compare`
runs the migrated program: npu (the real torch_npu, never the emulation) or cpu (the emulation). Without
`--device` the child takes what answers. The child checks again with the library in hand
(`child.protocol.device_for`); this check reads only package metadata, `npu-smi` and device nodes
(`migrator.doctor.probe`), so it never imports torch or torch_npu."""

from __future__ import annotations

import shutil

from migrator.doctor import probe
from migrator.doctor.env_checks import visibility_check
from migrator.doctor.model import Host

from .stage_kit import ValidationSetupError

RECORD_DEVICES = ("cuda", "cpu")
COMPARE_DEVICES = ("npu", "cpu")


def _cuda_answers(host: Host) -> str | None:
    """None when a CUDA device is there, else why not."""
    if shutil.which("nvidia-smi", path=host.env.get("PATH", "")) or any(host.path("/dev").glob("nvidia[0-9]*")):
        return None
    return "no NVIDIA device here (no nvidia-smi on PATH, no /dev/nvidia*)"


def _npu_answers(host: Host) -> str | None:
    """None when torch_npu is installed and an NPU is visible, else why not (with the fix)."""
    if probe.package("torch-npu", host).version is None:
        return "torch_npu is not installed (`migrate doctor` names the release for this torch)"
    smi = probe.npu_smi(host)
    if not smi.devices:
        return "no NPU answers (`npu-smi info` lists none" + (f": {smi.error}" if smi.error else "") + ")"
    visibility, usable = visibility_check(host, smi.devices)
    if not usable:
        return f"no visible NPU ({visibility.detail if visibility else 'ASCEND_RT_VISIBLE_DEVICES'})"
    return None


def select_device(requested: str | None, *, record: bool, compare: bool, host: Host | None = None) -> str | None:
    """The device the side run here must use (None: what answers), or ValidationSetupError with the reason."""
    if requested is None:
        return None
    if not (record or compare):
        raise ValidationSetupError("--device chooses the device of --record (cuda|cpu) or --compare (npu|cpu)")
    allowed = RECORD_DEVICES if record else COMPARE_DEVICES
    what = "--record runs the original program" if record else "--compare runs the migrated program"
    if requested not in allowed:
        raise ValidationSetupError(f"--device {requested}: {what}, on {' or '.join(allowed)}")
    host = host or Host()
    why_not = _cuda_answers(host) if requested == "cuda" else _npu_answers(host) if requested == "npu" else None
    if why_not:
        raise ValidationSetupError(f"--device {requested}: {why_not}")
    return requested
