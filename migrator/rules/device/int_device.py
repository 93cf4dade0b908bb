"""DEV bare integer devices: `torch.device(i)`, `.to(0)`, `device=0` name the CUDA device i."""

from __future__ import annotations

from typing import TYPE_CHECKING

from migrator.rules.site import FIXABLE, CallSite, Declined, Verdict

if TYPE_CHECKING:
    import libcst as cst

    from migrator.fix.context import FixContext
    from migrator.model import Finding

LEVEL = "either"
UNUSUAL = "unusual torch.device arguments"


def precheck(site: CallSite) -> Verdict:
    if site.called and (len(site.args) != 1 or site.args[0].keyword or site.star):
        return Declined(UNUSUAL)
    return FIXABLE


def fix(ctx: FixContext, node: cst.CSTNode, finding: Finding, rule) -> cst.CSTNode | Declined:
    import libcst as cst

    from migrator.fix.transforms.args import positional, with_args
    from migrator.fix.transforms.common import device

    if isinstance(node, cst.Call):  # torch.device(i)
        if len(node.args) != 1 or node.args[0].keyword or node.args[0].star:
            return Declined(UNUSUAL)
        index = node.args[0].value
        if ctx.target == "npu":
            return with_args(node, node.func, [positional(cst.SimpleString('"npu"')), positional(index)])
        return device(ctx, index)
    if isinstance(node, cst.Integer):
        if ctx.target == "npu":
            return cst.SimpleString(f'"npu:{node.value}"')
        return device(ctx, node)
    return Declined("not an integer device")
