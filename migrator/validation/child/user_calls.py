"""The harness's own calls on the program's objects (optimizer, model, scaler, data loader) that the protocol
does not declare, such as clearing gradients between the steps of our loop. Each takes the object's own
defaults, never an argument it may refuse: torch_npu's fused optimizers and Apex's define
``zero_grad(set_to_none=False)``, and torch_npu's raise on ``True`` (issue 45). Whatever such a call raises
is the harness's fault (exit 2, the caller's line named), never the program's."""

from __future__ import annotations

import sys
import traceback
from collections.abc import Callable
from typing import Any

from .errors import HarnessCallError


def clear_grads(owner: Any, what: str) -> None:
    """``owner.zero_grad()`` with the owner's own ``set_to_none`` default: torch's optimizers and modules
    (≥ 2.0) free the gradients, the fused ones zero them in place; either way the next backward gives the
    same gradients. ``what`` names the owner in a failure (``optimizer``, ``model``)."""
    _guarded(f"{what}.zero_grad()", _caller(), owner.zero_grad, (), {})


def _caller() -> traceback.FrameSummary:
    frame = sys._getframe(2)  # the caller of our public function
    return traceback.FrameSummary(frame.f_code.co_filename, frame.f_lineno, frame.f_code.co_name)


def _guarded(call: str, site: traceback.FrameSummary, fn: Callable[..., Any], args: tuple[Any, ...],
             kwargs: dict[str, Any]) -> Any:
    try:
        return fn(*args, **kwargs)
    except Exception as exc:
        raise HarnessCallError(call, site, exc) from exc
