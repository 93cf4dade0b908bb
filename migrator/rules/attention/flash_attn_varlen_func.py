"""ATTN002 `flash_attn_varlen_func(...)` -> `_migrate_flash_attn_varlen` (layout TND on Ascend)."""

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
KEEP = ["q", "k", "v", "cu_seqlens_q", "cu_seqlens_k", "max_seqlen_q", "max_seqlen_k", "dropout_p", "softmax_scale", "causal"]


def precheck(site: CallSite) -> Verdict:
    return _flash.check(site, _flash.VARLEN_PARAMS) or FIXABLE


def fix(ctx: FixContext, call: cst.Call, finding: Finding, rule: Rule) -> cst.CSTNode | Declined:
    return _flash.rebuild(ctx, call, _flash.VARLEN_PARAMS, KEEP, True)
