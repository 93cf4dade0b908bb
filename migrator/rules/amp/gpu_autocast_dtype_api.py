"""AMP `torch.get_autocast_gpu_dtype()` and friends -> the device-type API with the device first."""

from __future__ import annotations

from typing import TYPE_CHECKING

from migrator.catalogue.site import FIXABLE, CallSite, Declined, Verdict, needs_call

if TYPE_CHECKING:
    import libcst as cst

    from migrator.catalogue.loader import Rule
    from migrator.fix.context import FixContext
    from migrator.ground.model import Finding

LEVEL = "call"


def precheck(site: CallSite) -> Verdict:
    return needs_call(site) or FIXABLE


def fix(ctx: FixContext, call: cst.Call, finding: Finding, rule: Rule) -> cst.CSTNode | Declined:
    from migrator.fix.imports import symbol_replacement
    from migrator.fix.transforms.args import positional, with_args
    from migrator.fix.transforms.common import device_arg

    replacement = symbol_replacement(finding)
    if replacement is None:
        return Declined("no replacement name for this use")
    return with_args(call, ctx.expr_for(replacement), [positional(device_arg(ctx)), *call.args])
