"""Short, readable summaries of exceptions raised by the program under validation."""

from __future__ import annotations

import os
import traceback
from typing import Any


class CannotRun(ValueError):
    """The harness cannot run the program as declared (a batch that does not split over the ranks):
    the validation could not run (exit 2), the program did not fail."""


def failure_phase(exc: BaseException) -> str:
    return "harness" if isinstance(exc, CannotRun) else "run"


def _frames(exc: BaseException) -> list[traceback.FrameSummary]:
    return list(traceback.extract_tb(exc.__traceback__))


def user_frame(exc: BaseException, tree: str | None) -> traceback.FrameSummary | None:
    """The innermost frame inside ``tree`` (the program's own code), else the innermost frame."""
    frames = _frames(exc)
    if tree:
        root = os.path.abspath(tree) + os.sep
        inside = [f for f in frames if os.path.abspath(f.filename).startswith(root)]
        if inside:
            return inside[-1]
    return frames[-1] if frames else None


def summarize(exc: BaseException, tree: str | None = None) -> str:
    """``Type: message (at file:line in func: code)`` — one line, the program's frame preferred."""
    message = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    text = f"{type(exc).__name__}: {message}" if message else type(exc).__name__
    frame = user_frame(exc, tree)
    if frame is not None:
        where = os.path.relpath(frame.filename, tree) if tree and os.path.abspath(frame.filename).startswith(
            os.path.abspath(tree)) else os.path.basename(frame.filename)
        code = f": {frame.line.strip()}" if frame.line else ""
        text += f" (at {where}:{frame.lineno} in {frame.name}{code})"
    return text


def describe(exc: BaseException, tree: str | None = None, **extra: Any) -> dict[str, Any]:
    """JSON-able description of a failure: summary, short traceback (last 6 frames), extras."""
    tb = traceback.format_exception(type(exc), exc, exc.__traceback__)
    short = "".join(tb[-7:]) if len(tb) > 7 else "".join(tb)
    return {"type": type(exc).__name__, "summary": summarize(exc, tree), "traceback": short[-4000:], **extra}
