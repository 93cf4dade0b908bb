"""KERN018 `num_warps=` / `num_stages=` in `triton.Config(...)` or a launch: dropped (Ascend has neither)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from migrator.catalogue.site import FIXABLE, CallSite, Verdict

if TYPE_CHECKING:
    import libcst as cst

    from migrator.catalogue.loader import Rule
    from migrator.fix.context import FixContext
    from migrator.ground.model import Finding

LEVEL = "argument"  # the finding is the keyword's value; the whole keyword argument goes


def precheck(site: CallSite) -> Verdict:
    return FIXABLE


def fix(ctx: FixContext, node: cst.Arg, finding: Finding, rule: Rule) -> cst.RemovalSentinel:
    import libcst as cst

    return cst.RemoveFromParent()
