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
    if isinstance(node, cst.Call):  # `custom_fwd(fn)` (fairscale): the function stays first, the keyword after it
        positional = [a for a in node.args if a.keyword is None and a.star != "**"]
        return with_args(node, func, [*positional, device, *node.args[len(positional):]])
    return cst.Call(func=func, args=[device])
