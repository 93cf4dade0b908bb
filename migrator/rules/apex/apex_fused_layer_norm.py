"""APEX020 `FusedLayerNorm` -> `torch.nn.LayerNorm` (same eps and elementwise_affine)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from migrator.catalogue.site import CallSite, Declined, Verdict
from migrator.rules.apex import _norm

if TYPE_CHECKING:
    import libcst as cst

    from migrator.catalogue.loader import Rule
    from migrator.fix.context import FixContext
    from migrator.ground.model import Finding

LEVEL = "call"


def precheck(site: CallSite) -> Verdict:
    return _norm.precheck(site, "LayerNorm")


def fix(ctx: FixContext, call: cst.Call, finding: Finding, rule: Rule) -> cst.CSTNode | Declined:
    from migrator.fix.transforms.args import with_args

    args = _norm.norm_args(call)
    return Declined("unusual FusedLayerNorm arguments") if args is None else with_args(call, ctx.expr_for("torch.nn.LayerNorm"), args)
