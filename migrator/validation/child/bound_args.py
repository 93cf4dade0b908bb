"""Patch a callable so its arguments are edited after binding, whether given by position or keyword (both
reference layers: the torch_npu emulation and the CUDA device remap)."""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Any


def wrap_bound(fn: Callable[..., Any], transform: Callable[[dict[str, object]], None]) -> Callable[..., Any]:
    """Wrap ``fn`` so its bound arguments pass through ``transform`` (edited in place) first (the
    reference layers' rules for constructors such as DDP, DeviceMesh, GradScaler, autocast, and for
    functions whose argument may come by position or keyword, such as ``torch.load``'s map_location).

    If the call does not bind (wrong arguments), the original is called unchanged so that the
    user sees torch's own error message.
    """
    sig = inspect.signature(fn)

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            bound = sig.bind(*args, **kwargs)
        except TypeError:
            return fn(*args, **kwargs)
        transform(bound.arguments)
        return fn(*bound.args, **bound.kwargs)

    wrapper.__npu_emulation_wrapped__ = fn  # type: ignore[attr-defined]
    return wrapper
