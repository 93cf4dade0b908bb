"""ATTN003 packed FlashAttention (`flash_attn_qkvpacked_func`, `flash_attn_kvpacked_func`): the packed
tensor is unbound into q/k/v for `_migrate_flash_attn`. Packed varlen calls stay manual."""

from __future__ import annotations

from typing import TYPE_CHECKING

from migrator.catalogue.site import FIXABLE, CallSite, Declined, Verdict, needs_call
from migrator.rules.attention import _flash

if TYPE_CHECKING:
    import libcst as cst

    from migrator.catalogue.loader import Rule
    from migrator.fix.context import FixContext
    from migrator.ground.model import Finding

LEVEL = "call"
QKV = ["qkv", *_flash.FLASH_PARAMS[3:]]
KV = ["q", "kv", *_flash.FLASH_PARAMS[3:]]
VARLEN = "packed varlen attention: unpack q/k/v and use the varlen rewrite by hand"


def precheck(site: CallSite) -> Verdict:
    if (declined := needs_call(site)) is not None:
        return declined
    if "varlen" in site.name:
        return Declined(VARLEN)
    if site.name == "flash_attn_qkvpacked_func":
        return _flash.check(site, QKV, ("qkv",)) or FIXABLE
    return _flash.check(site, KV, ("q", "kv")) or FIXABLE


def fix(ctx: FixContext, call: cst.Call, finding: Finding, rule: Rule) -> cst.CSTNode | Declined:
    import libcst as cst

    from migrator.fix.transforms.args import bind, code

    name = finding.symbol.rsplit(".", 1)[-1]
    params = QKV if name == "flash_attn_qkvpacked_func" else KV
    args = bind(call, params)
    if args is None or "varlen" in name:
        return Declined(VARLEN if "varlen" in name else _flash.UNUSUAL)
    if name == "flash_attn_qkvpacked_func":
        prefix = [cst.Arg(value=cst.parse_expression(f"{code(args['qkv'].value)}.unbind(2)"), star="*")]
    else:  # flash_attn_kvpacked_func(q, kv, ...)
        prefix = [
            args["q"].with_changes(keyword=None, equal=cst.MaybeSentinel.DEFAULT),
            cst.Arg(value=cst.parse_expression(f"{code(args['kv'].value)}.unbind(2)"), star="*"),
        ]
    return _flash.rebuild(ctx, call, params, ["dropout_p", "softmax_scale", "causal"], False, prefix_args=prefix)
