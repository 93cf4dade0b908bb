"""AMP `torch.cuda.amp.custom_fwd/custom_bwd` -> `torch.amp.custom_fwd(device_type=...)`."""

from __future__ import annotations

from typing import TYPE_CHECKING

from migrator.catalogue.site import FIXABLE, CallSite, Verdict

if TYPE_CHECKING:
    import libcst as cst

    from migrator.catalogue.loader import Rule
    from migrator.fix.context import FixContext
    from migrator.ground.model import Finding

LEVEL = "either"


def precheck(site: CallSite) -> Verdict:
    return FIXABLE  # every site the scanner reports is rewritten


def fix(ctx: FixContext, node: cst.CSTNode, finding: Finding, rule: Rule) -> cst.CSTNode:
    import libcst as cst

    from migrator.fix.transforms.args import kwarg, with_args
    from migrator.fix.transforms.common import device_arg

    name = finding.symbol.rsplit(".", 1)[-1]
    func = ctx.expr_for(f"torch.amp.{name}")
    device = kwarg("device_type", device_arg(ctx))
    if isinstance(node, cst.Call):
        return with_args(node, func, [device, *node.args])
    return cst.Call(func=func, args=[device])
