"""Named fix transforms, referenced from the catalogue as `fix: transform:<name>` (or `rename`).

A transform takes (ctx, node, finding, rule) and returns the new node, or None after calling
`ctx.decline(finding, reason)` when the site cannot be rewritten safely.
"""

from __future__ import annotations

from migrator.fix.transforms.registry import CALL_LEVEL, EITHER_LEVEL, TRANSFORMS, Transform, register

__all__ = ["CALL_LEVEL", "EITHER_LEVEL", "TRANSFORMS", "Transform", "register"]

from migrator.fix.transforms import apex, attention, basic  # noqa: E402,F401  (they register themselves)
