"""The table of named transforms; each transform module registers its functions here."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import libcst as cst

Transform = Callable[..., "cst.CSTNode | None"]
TRANSFORMS: dict[str, Transform] = {}
CALL_LEVEL: set[str] = set()  # applied to the whole call whose callee carries the finding
EITHER_LEVEL: set[str] = set()  # applied to the call when called, to the bare name otherwise


def register(name: str, level: str = "node"):
    def wrap(fn: Transform) -> Transform:
        TRANSFORMS[name] = fn
        if level == "call":
            CALL_LEVEL.add(name)
        elif level == "either":
            EITHER_LEVEL.add(name)
        return fn

    return wrap
