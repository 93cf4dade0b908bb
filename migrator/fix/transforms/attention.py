"""FlashAttention and xformers calls rewritten onto a per-file `_migrate_flash_attn*` helper.

The helper (npu: npu_fusion_attention; portable: SDPA) carries scale, mask polarity, layout and
causal alignment once. Arguments npu_fusion_attention would silently ignore are never dropped:
such calls are left alone with a manual reason.
"""

from __future__ import annotations

import libcst as cst

from migrator.fix.context import FixContext
from migrator.fix.transforms import helpers
from migrator.fix.transforms.args import NOT_LITERAL, bind, code, kwarg, literal, with_args
from migrator.fix.transforms.registry import register
from migrator.model import Finding

FLASH_PARAMS = [
    "q", "k", "v", "dropout_p", "softmax_scale", "causal", "window_size", "softcap", "alibi_slopes",
    "deterministic", "return_attn_probs",
]
VARLEN_PARAMS = [
    "q", "k", "v", "cu_seqlens_q", "cu_seqlens_k", "max_seqlen_q", "max_seqlen_k", "dropout_p",
    "softmax_scale", "causal", "window_size", "softcap", "alibi_slopes", "deterministic", "return_attn_probs",
]
# argument -> (value that means "off", why the NPU op cannot honour anything else)
UNSUPPORTED = {
    "window_size": ((-1, -1), "sliding-window attention (`window_size`) has no documented npu_fusion_attention mapping"),
    "softcap": (0.0, "`softcap` is not supported by npu_fusion_attention"),
    "alibi_slopes": (None, "ALiBi (`alibi_slopes`) would need an explicit `pse` bias; not rewritten automatically"),
    "deterministic": (False, "`deterministic=True` has no per-call switch on Ascend (use torch.use_deterministic_algorithms)"),
    "return_attn_probs": (False, "`return_attn_probs` is not available from npu_fusion_attention"),
}


def _unsupported(args: dict[str, cst.Arg]) -> str | None:
    for name, (off, why) in UNSUPPORTED.items():
        if name in args:
            value = literal(args[name])
            if value is NOT_LITERAL or value != off:
                return why
    return None


def _helper(ctx: FixContext, varlen: bool) -> cst.Name:
    if varlen:
        source = helpers.FLASH_ATTN_VARLEN_NPU if ctx.target == "npu" else helpers.FLASH_ATTN_VARLEN_PORTABLE
        name = "_migrate_flash_attn_varlen"
    else:
        source = helpers.FLASH_ATTN_NPU if ctx.target == "npu" else helpers.FLASH_ATTN_PORTABLE
        name = "_migrate_flash_attn"
    if ctx.target == "npu":
        ctx.needs_torch_npu = True
    return ctx.helper(name, source)


def _rebuild(ctx, call, finding, params, keep, varlen, prefix_args=None):
    args = bind(call, params)
    if args is None:
        ctx.decline(finding, "the call uses *args/**kwargs or unknown keywords; rewrite it by hand")
        return None
    why = _unsupported(args)
    if why:
        ctx.decline(finding, why)
        return None
    new_args = list(prefix_args or [])
    for i, name in enumerate(keep):
        if name not in args:
            continue
        arg = args[name]
        positional_ok = arg.keyword is None and len(new_args) == i and not prefix_args
        new_args.append(arg if positional_ok or arg.keyword is not None else kwarg(name, arg.value))
    return with_args(call, _helper(ctx, varlen), new_args)


@register("flash-attn", level="call")
def flash_attn(ctx: FixContext, call: cst.Call, finding: Finding, rule) -> cst.CSTNode | None:
    return _rebuild(ctx, call, finding, FLASH_PARAMS, ["q", "k", "v", "dropout_p", "softmax_scale", "causal"], False)


@register("flash-attn-varlen", level="call")
def flash_attn_varlen(ctx: FixContext, call: cst.Call, finding: Finding, rule) -> cst.CSTNode | None:
    keep = ["q", "k", "v", "cu_seqlens_q", "cu_seqlens_k", "max_seqlen_q", "max_seqlen_k", "dropout_p", "softmax_scale", "causal"]
    return _rebuild(ctx, call, finding, VARLEN_PARAMS, keep, True)


@register("flash-attn-packed", level="call")
def flash_attn_packed(ctx: FixContext, call: cst.Call, finding: Finding, rule) -> cst.CSTNode | None:
    name = finding.symbol.rsplit(".", 1)[-1]
    if "varlen" in name:
        ctx.decline(finding, "packed varlen attention: unpack q/k/v and use the varlen rewrite by hand")
        return None
    if name == "flash_attn_qkvpacked_func":
        args = bind(call, ["qkv", *FLASH_PARAMS[3:]])
        if args is None or "qkv" not in args:
            ctx.decline(finding, "unusual arguments")
            return None
        packed = code(args["qkv"].value)
        prefix = [cst.Arg(value=cst.parse_expression(f"{packed}.unbind(2)"), star="*")]
        params = ["qkv", *FLASH_PARAMS[3:]]
    else:  # flash_attn_kvpacked_func(q, kv, ...)
        args = bind(call, ["q", "kv", *FLASH_PARAMS[3:]])
        if args is None or "kv" not in args:
            ctx.decline(finding, "unusual arguments")
            return None
        prefix = [
            args["q"].with_changes(keyword=None, equal=cst.MaybeSentinel.DEFAULT),
            cst.Arg(value=cst.parse_expression(f"{code(args['kv'].value)}.unbind(2)"), star="*"),
        ]
        params = ["q", "kv", *FLASH_PARAMS[3:]]
    return _rebuild(ctx, call, finding, params, ["dropout_p", "softmax_scale", "causal"], False, prefix_args=prefix)


XFORMERS_MASKS = {
    "LowerTriangularMask": "top_left",
    "LowerTriangularFromBottomRightMask": "bottom_right",
}


@register("xformers-attention", level="call")
def xformers_attention(ctx: FixContext, call: cst.Call, finding: Finding, rule) -> cst.CSTNode | None:
    if finding.code == "ATTN011":
        return call  # a mask constructor: rewritten with its memory_efficient_attention call
    args = bind(call, ["query", "key", "value", "attn_bias", "p", "scale", "op", "output_dtype"])
    if args is None or any(k in args for k in ("op", "output_dtype")):
        ctx.decline(finding, "unusual memory_efficient_attention arguments (op/output_dtype)")
        return None
    align = None
    if "attn_bias" in args:
        bias = args["attn_bias"].value
        if isinstance(bias, cst.Call):
            bias = bias.func
        name = code(bias).rsplit(".", 1)[-1]
        if name == "None":
            align = None
        elif name in XFORMERS_MASKS:
            align = XFORMERS_MASKS[name]
        else:
            ctx.decline(finding, f"attn_bias `{code(args['attn_bias'].value)}` has no npu_fusion_attention equivalent")
            return None
    new_args = [args["query"].with_changes(keyword=None, equal=cst.MaybeSentinel.DEFAULT),
                args["key"].with_changes(keyword=None, equal=cst.MaybeSentinel.DEFAULT),
                args["value"].with_changes(keyword=None, equal=cst.MaybeSentinel.DEFAULT)]
    if "p" in args:
        new_args.append(kwarg("dropout_p", args["p"].value))
    if "scale" in args:
        new_args.append(kwarg("softmax_scale", args["scale"].value))
    if align:
        new_args.append(kwarg("causal", "True"))
        new_args.append(kwarg("causal_align", cst.SimpleString(f'"{align}"')))
    return with_args(call, _helper(ctx, False), new_args)
