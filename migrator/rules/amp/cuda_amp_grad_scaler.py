"""AMP `torch.cuda.amp.GradScaler` -> `torch.npu.amp.GradScaler` (npu), `torch.amp.GradScaler(<device>)` (portable)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from migrator.catalogue.site import FIXABLE, CallSite, Declined, Verdict
from migrator.ground.kinds import Target

if TYPE_CHECKING:
    import libcst as cst

    from migrator.catalogue.loader import Rule
    from migrator.fix.context import FixContext
    from migrator.ground.model import Finding

LEVEL = "either"
VALUE = "GradScaler used as a value: pass the device when constructing it"


def precheck(site: CallSite) -> Verdict:
    if site.target != Target.NPU and not site.called:
        return Declined(VALUE)
    return FIXABLE


def fix(ctx: FixContext, node: cst.CSTNode, finding: Finding, rule: Rule) -> cst.CSTNode | Declined:
    import libcst as cst

    from migrator.fix.transforms.args import positional, with_args
    from migrator.fix.transforms.common import device_type

    if not isinstance(node, cst.Call):
        return ctx.expr_for("torch.npu.amp.GradScaler") if ctx.target == Target.NPU else Declined(VALUE)
    if ctx.target == Target.NPU:
        return node.with_changes(func=ctx.expr_for("torch.npu.amp.GradScaler"))
    return with_args(node, ctx.expr_for("torch.amp.GradScaler"), [positional(device_type(ctx)), *node.args])
