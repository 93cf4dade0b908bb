"""ATTN010 xformers `memory_efficient_attention` -> `_migrate_flash_attn` (BSND; LowerTriangularMask is
top-left causal, LowerTriangularFromBottomRightMask bottom-right; other attn_bias kinds stay manual)."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from migrator.catalogue.site import FIXABLE, CallSite, Declined, Verdict, needs_call, unparenthesised
from migrator.rules.attention import _flash

if TYPE_CHECKING:
    import libcst as cst

    from migrator.catalogue.loader import Rule
    from migrator.fix.context import FixContext
    from migrator.ground.model import Finding

LEVEL = "call"
PARAMS = ["query", "key", "value", "attn_bias", "p", "scale", "op", "output_dtype"]
MASKS = {"LowerTriangularMask": "top_left", "LowerTriangularFromBottomRightMask": "bottom_right"}
CALLEE = re.compile(r"^([\w.\s]+?)\s*(\(.*\))?$", re.S)


def mask_name(text: str) -> str:
    """`xops.LowerTriangularMask()` -> `LowerTriangularMask`; `None` -> `None`."""
    text = unparenthesised(text)
    m = CALLEE.match(text)
    return re.sub(r"\s", "", m.group(1)).rsplit(".", 1)[-1] if m else text


def precheck(site: CallSite) -> Verdict:
    if (declined := needs_call(site)) is not None:
        return declined
    args = site.bind(PARAMS)
    if args is None or any(k in args for k in ("op", "output_dtype")) or not all(k in args for k in PARAMS[:3]):
        return Declined("unusual memory_efficient_attention arguments (op/output_dtype)")
    if "attn_bias" in args and mask_name(args["attn_bias"].text) not in ("None", *MASKS):
        return Declined(f"attn_bias `{args['attn_bias'].text}` has no npu_fusion_attention equivalent")
    return FIXABLE


def fix(ctx: FixContext, call: cst.Call, finding: Finding, rule: Rule) -> cst.CSTNode | Declined:
    import libcst as cst

    from migrator.fix.transforms.args import as_keyword, bind, code, kwarg, with_args

    args = bind(call, PARAMS)
    if args is None:
        return Declined("unusual memory_efficient_attention arguments (op/output_dtype)")
    align = MASKS.get(mask_name(code(args["attn_bias"].value))) if "attn_bias" in args else None
    new_args = [args[k].with_changes(keyword=None, equal=cst.MaybeSentinel.DEFAULT) for k in PARAMS[:3]]
    if "p" in args:
        new_args.append(as_keyword(args["p"], "dropout_p"))
    if "scale" in args:
        new_args.append(as_keyword(args["scale"], "softmax_scale"))
    if align:
        new_args.append(kwarg("causal", "True"))
        new_args.append(kwarg("causal_align", cst.SimpleString(f'"{align}"')))
    return with_args(call, _flash.helper(ctx, False), new_args)
