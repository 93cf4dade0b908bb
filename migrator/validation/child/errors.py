"""Short, readable summaries of exceptions raised by the program under validation, and who raised them:
an exception whose innermost frame (of the program's tree and this package) is in our own code is a
harness error (exit 2, our frame named), never the program's failure."""

from __future__ import annotations

import os
import traceback
from collections.abc import Sequence
from typing import TypedDict


class CannotRun(ValueError):
    """The harness cannot run the program as declared (a batch that does not split over the ranks):
    the validation could not run (exit 2), the program did not fail."""


class ProgramFault(Exception):
    """Raised by our code about the program (its state_dict does not match the shared weights): the
    program's fault although the frame is ours."""


class HarnessCallError(RuntimeError):
    """A call of ours on the program's object (one the protocol does not declare) raised: the harness's
    fault, whichever frame raised; ``site`` is our line that made the call."""

    def __init__(self, call: str, site: traceback.FrameSummary, cause: BaseException) -> None:
        super().__init__(f"the harness's {call} raised {type(cause).__name__}: {cause}")
        self.site = site


_PACKAGE = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))) + os.sep  # migrator/
# the reference layers stand in for the user's libraries (torch_npu, flash_attn, ...) and our wrappers call
# the ops they wrap through passthrough.call: those frames count as library frames, like torch's
_HERE = os.path.dirname(os.path.abspath(__file__))
_LIBRARY = tuple(os.path.join(_HERE, d) + os.sep for d in ("npu_emulation", "cuda_reference")) + (
    os.path.join(_HERE, "passthrough.py"),)


def harness_frame(exc: BaseException, tree: str | None) -> traceback.FrameSummary | None:
    """Our frame when the exception was raised in our own code — the innermost frame is ours (a raise, or a
    builtin / C op called with our arguments) — else None: raised in the program, or in torch or a library
    the program or our code called (``loss.backward()`` of a broken graph is the program's)."""
    if isinstance(exc, ProgramFault):
        return None
    if isinstance(exc, HarnessCallError):
        return exc.site
    frames = _frames(exc)
    if not frames:
        return None
    frame = frames[-1]
    path = os.path.abspath(frame.filename)
    if tree and path.startswith(os.path.abspath(tree) + os.sep):
        return None
    return frame if path.startswith(_PACKAGE) and not path.startswith(_LIBRARY) else None


def failure_phase(exc: BaseException, tree: str | None = None) -> str:
    """``harness`` (exit 2: the program could not be run as declared, or our code raised), else ``run``."""
    return "harness" if isinstance(exc, CannotRun) or harness_frame(exc, tree) is not None else "run"


def frame_text(frame: traceback.FrameSummary) -> str:
    where = os.path.relpath(os.path.abspath(frame.filename), os.path.dirname(_PACKAGE.rstrip(os.sep)))
    return f"{where}:{frame.lineno} in {frame.name}" + (f": {frame.line.strip()}" if frame.line else "")


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


# a known library refusal and what the port does instead, appended to the summary
_HINTS = (("set_to_none is not supported in fused optimizers",
           "torch_npu's fused optimizers zero gradients in place: call zero_grad(set_to_none=False)"),)


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
    hints = [hint for known, hint in _HINTS if known in message]
    if isinstance(exc, ModuleNotFoundError) and exc.name and tree:
        hints.append(_missing_module_hint(exc.name.partition(".")[0], tree))
    return text + "".join(f"; {hint}" for hint in hints)


_NOT_SOURCE = {"__pycache__", "node_modules", "site-packages", "build", "dist", "venv"}


def _missing_module_hint(top: str, tree: str, depth: int = 4) -> str:
    """Where the tree holds the missing top-level module, and the flag that puts it on the path."""
    root = os.path.abspath(tree)
    for folder, dirs, files in os.walk(root):
        rel = os.path.relpath(folder, root)
        dirs[:] = sorted(d for d in dirs if not d.startswith(".") and d not in _NOT_SOURCE)
        if rel.count(os.sep) + 1 >= depth:
            dirs[:] = []
        if f"{top}.py" in files or os.path.isfile(os.path.join(folder, top, "__init__.py")):
            if rel != ".":
                return f"{top} is in this tree under {rel}/: pass --pythonpath {rel} (each side then imports its own copy)"
    return f"{top} is neither in this tree nor installed: install the program's requirements in this environment"


class FailureInfo(TypedDict, total=False):
    """A failure as a status under construction holds it: the JSON shape of ``records.Failure``."""

    type: str
    summary: str
    traceback: str
    during: str
    active_modules: list[str]
    harness_frame: str


def describe(exc: BaseException, tree: str | None = None, *, during: str | None = None,
             active_modules: Sequence[str] | None = None) -> FailureInfo:
    """JSON-able description of a failure: summary, short traceback (last 6 frames), what was running
    (``during``) and the module stack (``active_modules``) when given."""
    tb = traceback.format_exception(type(exc), exc, exc.__traceback__)
    short = "".join(tb[-7:]) if len(tb) > 7 else "".join(tb)
    ours = None if isinstance(exc, CannotRun) else harness_frame(exc, tree)
    out = FailureInfo(type=type(exc).__name__, summary=summarize(exc, tree), traceback=short[-4000:])
    if during is not None:
        out["during"] = during
    if active_modules is not None:
        out["active_modules"] = list(active_modules)
    if ours is not None:
        out["harness_frame"] = frame_text(ours)
    return out
