"""Emulated ``torch_npu.npu.amp`` (``torch.npu.amp``): autocast, GradScaler, custom_fwd/bwd.

EMULATION on CPU (ascend-facts §d: ``apex.amp`` → ``torch.npu.amp.autocast`` +
``torch.npu.amp.GradScaler``; §b.1: ``cuda.amp`` is filled from ``torch_npu.npu.amp``).

* ``autocast`` is CPU autocast. Its default dtype is the one given to
  ``install(amp_dtype=...)``, **float16 by default**, as the real ``torch_npu.npu.amp.autocast``
  (``torch_npu/npu/amp/autocast_mode.py``) and ``torch.autocast("npu")`` without a dtype: a
  program's fp16 policy is never silently run as bf16. An explicit ``dtype=`` is always honoured
  (CPU autocast supports bf16 and fp16).
* ``GradScaler`` is ``torch.amp.GradScaler("cpu")`` plus torch_npu's extra ``dynamic`` argument:
  ``dynamic=False`` keeps the scale fixed and always steps (the real static-scale path,
  ``torch_npu/npu/amp/grad_scaler.py``). If CPU loss scaling cannot be constructed (very old
  torch), the scaler is created disabled, i.e. a pass-through no-op, and says so in a warning.
"""

from __future__ import annotations

import warnings
from collections import defaultdict
from typing import Any

import torch
from torch.amp import grad_scaler as _gs

from .npu import STATE


class autocast(torch.amp.autocast_mode.autocast):
    """Emulated ``torch.npu.amp.autocast(enabled=True, dtype=..., cache_enabled=True)`` (§d, §b.1).

    Runs CPU autocast; ``dtype=None`` means the emulation default (bf16 unless
    ``install(amp_dtype=...)`` says otherwise; fp16 as real torch_npu).
    """

    def __init__(self, enabled: bool = True, dtype: torch.dtype | None = None, cache_enabled: bool = True) -> None:
        super().__init__("cpu", dtype=dtype if dtype is not None else STATE.amp_dtype,
                         enabled=enabled, cache_enabled=cache_enabled)


def custom_fwd(fwd: Any = None, *, cast_inputs: torch.dtype | None = None) -> Any:
    """Emulated ``torch.npu.amp.custom_fwd`` (§b.2 autocast rule): ``torch.amp.custom_fwd(device_type="cpu")``."""
    return torch.amp.autocast_mode.custom_fwd(fwd, device_type="cpu", cast_inputs=cast_inputs)


def custom_bwd(bwd: Any = None) -> Any:
    """Emulated ``torch.npu.amp.custom_bwd`` (§b.2): ``torch.amp.custom_bwd(device_type="cpu")``."""
    return torch.amp.autocast_mode.custom_bwd(bwd, device_type="cpu")


class GradScaler(torch.amp.GradScaler):
    """Emulated ``torch.npu.amp.GradScaler`` (§d): CPU ``torch.amp.GradScaler`` with ``dynamic``.

    Signature as torch_npu: ``(init_scale=2.**16, growth_factor=2.0, backoff_factor=0.5,
    growth_interval=2000, dynamic=True, enabled=True)``.
    """

    def __init__(self, init_scale: float = 2.0 ** 16, growth_factor: float = 2.0, backoff_factor: float = 0.5,
                 growth_interval: int = 2000, dynamic: bool = True, enabled: bool = True) -> None:
        if enabled:
            if growth_factor <= 1.0:
                raise ValueError("The growth factor must be > 1.0.")
            if backoff_factor >= 1.0:
                raise ValueError("The backoff factor must be < 1.0.")
        try:
            super().__init__("cpu", init_scale=init_scale, growth_factor=growth_factor,
                             backoff_factor=backoff_factor, growth_interval=growth_interval, enabled=enabled)
        except (RuntimeError, AssertionError, TypeError, ValueError) as exc:  # pragma: no cover - old torch
            warnings.warn(f"torch_npu emulation: CPU GradScaler unavailable ({exc}); using a disabled "
                          "(pass-through) scaler", RuntimeWarning, stacklevel=2)
            super().__init__("cpu", enabled=False)
        self._dynamic = dynamic

    def step(self, optimizer: torch.optim.Optimizer, *args: Any, **kwargs: Any) -> Any:
        """Dynamic: skip the step on inf/nan (torch semantics). Static: unscale and always step (§d)."""
        if not self._enabled or self._dynamic:
            return super().step(optimizer, *args, **kwargs)
        state = self._per_optimizer_states[id(optimizer)]
        if state["stage"] is _gs.OptState.STEPPED:
            raise RuntimeError("step() has already been called since the last update().")
        if state["stage"] is _gs.OptState.READY:
            self.unscale_(optimizer)
        result = optimizer.step(*args, **kwargs)
        state["stage"] = _gs.OptState.STEPPED
        return result

    def update(self, new_scale: Any = None) -> None:
        """Dynamic: torch's update. Static: scale unchanged unless ``new_scale`` is given (§d)."""
        if not self._enabled:
            return
        if self._dynamic or new_scale is not None:
            super().update(new_scale)
            return
        self._per_optimizer_states = defaultdict(_gs._refresh_per_optimizer_state)

    def state_dict(self) -> dict:
        state = super().state_dict()
        if self._enabled:
            state["dynamic"] = self._dynamic
        return state

    def load_state_dict(self, state_dict: dict) -> None:
        state_dict = dict(state_dict)
        self._dynamic = state_dict.pop("dynamic", self._dynamic)
        super().load_state_dict(state_dict)


__all__ = ["autocast", "GradScaler", "custom_fwd", "custom_bwd"]
