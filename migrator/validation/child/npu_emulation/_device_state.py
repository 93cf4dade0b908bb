"""The emulated device's mutable state and device-argument parsing, shared by :mod:`.npu` and
:mod:`.npu_streams`."""

from __future__ import annotations

from typing import Any

import torch

from .remap import AMP_DEFAULT, is_npu_string


class _State:
    """Mutable runtime state of the emulated device (reset by ``install``)."""

    def __init__(self) -> None:
        self.device_count = 1
        self.current_device = 0
        self.amp_dtype = torch.float16
        self.current_stream: Any = None  # an npu_streams.Stream once one is set
        self.mstx_stack: list = []
        self.mstx_next_id = 1

    @property
    def amp_dtype(self) -> torch.dtype:
        return AMP_DEFAULT["dtype"]

    @amp_dtype.setter
    def amp_dtype(self, dtype: torch.dtype) -> None:
        AMP_DEFAULT["dtype"] = dtype


STATE = _State()


def _index(device: Any = None) -> int:
    if device is None:
        return STATE.current_device
    if isinstance(device, bool):
        raise TypeError(f"invalid device {device!r}")
    if isinstance(device, int):
        return device
    if isinstance(device, str):
        if is_npu_string(device) or device.strip() == "cpu":
            _, _, idx = device.partition(":")
            return int(idx) if idx else STATE.current_device
        raise ValueError(f"torch_npu emulation: expected an npu device, got {device!r}")
    if isinstance(device, torch.device):
        return device.index if device.index is not None else STATE.current_device
    raise TypeError(f"torch_npu emulation: cannot interpret device {device!r}")
