"""Named fix transforms, referenced from the catalogue as `fix: transform:<name>` (or `rename`).

A transform takes (ctx, node, finding, rule) and returns the new node, or None after calling
`ctx.decline(finding, reason)` when the site cannot be rewritten safely.
"""

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


from migrator.fix.transforms import apex, attention, basic  # noqa: E402,F401  (registration)
