"""APEX021 `FusedRMSNorm` -> an `npu_rms_norm` module (npu) or `torch.nn.RMSNorm` (portable), eps explicit."""

from __future__ import annotations

from typing import TYPE_CHECKING

from migrator.catalogue.site import CallSite, Declined, Verdict
from migrator.ground.kinds import Target
from migrator.rules.apex import _norm

if TYPE_CHECKING:
    import libcst as cst

    from migrator.catalogue.loader import Rule
    from migrator.fix.context import FixContext
    from migrator.ground.model import Finding

LEVEL = "call"


def precheck(site: CallSite) -> Verdict:
    return _norm.precheck(site, "RMSNorm")


def fix(ctx: FixContext, call: cst.Call, finding: Finding, rule: Rule) -> cst.CSTNode | Declined:
    from migrator.fix.transforms.args import with_args
    from migrator.fix.transforms.helpers import RMS_NORM_NPU

    args = _norm.norm_args(call)
    if args is None:
        return Declined("unusual FusedRMSNorm arguments")
    func: cst.BaseExpression
    if ctx.target == Target.NPU:
        ctx.needs_torch_npu = True
        func = ctx.helper("_MigrateRMSNorm", RMS_NORM_NPU)
    else:
        func = ctx.expr_for("torch.nn.RMSNorm")
    return with_args(call, func, args)
