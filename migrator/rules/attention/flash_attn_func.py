"""ATTN001 `flash_attn_func(q, k, v, ...)` -> `_migrate_flash_attn` (npu_fusion_attention or SDPA)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from migrator.catalogue.site import FIXABLE, CallSite, Declined, Verdict
from migrator.rules.attention import _flash

if TYPE_CHECKING:
    import libcst as cst

    from migrator.catalogue.loader import Rule
    from migrator.fix.context import FixContext
    from migrator.ground.model import Finding

LEVEL = "call"
KEEP = ["q", "k", "v", "dropout_p", "softmax_scale", "causal"]


def precheck(site: CallSite) -> Verdict:
    return _flash.check(site, _flash.FLASH_PARAMS) or FIXABLE


def fix(ctx: FixContext, call: cst.Call, finding: Finding, rule: Rule) -> cst.CSTNode | Declined:
    return _flash.rebuild(ctx, call, _flash.FLASH_PARAMS, KEEP, False)
