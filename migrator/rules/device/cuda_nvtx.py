"""DEV `torch.cuda.nvtx.range_push/range_pop/mark` -> `torch_npu.npu.mstx.*` (npu only)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from migrator.catalogue.site import FIXABLE, CallSite, Declined, Verdict, needs_call
from migrator.ground.kinds import Target

if TYPE_CHECKING:
    import libcst as cst

    from migrator.catalogue.loader import Rule
    from migrator.fix.context import FixContext
    from migrator.ground.model import Finding

LEVEL = "call"


def precheck(site: CallSite) -> Verdict:
    if (declined := needs_call(site)) is not None:
        return declined
    if site.target == Target.NPU:  # the rule's names are exactly torch_npu.npu.mstx's
        return FIXABLE
    return Declined(f"`nvtx.{site.name}` has no automatic {site.target} rewrite; remove it or use torch_npu.npu.mstx")


def fix(ctx: FixContext, call: cst.Call, finding: Finding, rule: Rule) -> cst.CSTNode | Declined:
    import libcst as cst

    ctx.needs_torch_npu = True
    name = finding.symbol.rsplit(".", 1)[-1]
    return call.with_changes(func=cst.parse_expression(f"torch_npu.npu.mstx.{name}"))
