"""What the FlashAttention rewrites share: the signatures, the arguments npu_fusion_attention cannot
honour, and the per-file `_migrate_flash_attn*` helper (npu: npu_fusion_attention; portable: SDPA)
that carries scale, mask polarity, layout and causal alignment once. Arguments the helper would
silently ignore are never dropped: such calls are declined with a reason."""

from __future__ import annotations

from typing import TYPE_CHECKING

from migrator.catalogue.site import NOT_LITERAL, Arg, CallSite, Declined, needs_call
from migrator.ground.kinds import Target

if TYPE_CHECKING:
    import libcst as cst

    from migrator.fix.context import FixContext

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
UNUSUAL = "the call uses *args/**kwargs or unknown keywords; rewrite it by hand"


def check(site: CallSite, params: list[str], required: tuple[str, ...] = ()) -> Declined | None:
    """Why the call cannot be rewritten onto the helper, or None."""
    if (declined := needs_call(site)) is not None:
        return declined
    args = site.bind(params)
    if args is None or any(name not in args for name in required):
        return Declined(UNUSUAL)
    return unsupported(args)


def unsupported(args: dict[str, Arg]) -> Declined | None:
    for name, (off, why) in UNSUPPORTED.items():
        if name in args and (args[name].value is NOT_LITERAL or args[name].value != off):
            return Declined(why)
    return None


def helper(ctx: FixContext, varlen: bool) -> cst.Name:
    from migrator.fix.transforms import helpers

    if varlen:
        source = helpers.FLASH_ATTN_VARLEN_NPU if ctx.target == Target.NPU else helpers.FLASH_ATTN_VARLEN_PORTABLE
        name = "_migrate_flash_attn_varlen"
    else:
        source = helpers.FLASH_ATTN_NPU if ctx.target == Target.NPU else helpers.FLASH_ATTN_PORTABLE
        name = "_migrate_flash_attn"
    if ctx.target == Target.NPU:
        ctx.needs_torch_npu = True
    return ctx.helper(name, source)


def rebuild(ctx: FixContext, call: cst.Call, params: list[str], keep: list[str], varlen: bool,
            prefix_args: list[cst.Arg] | None = None) -> cst.Call | Declined:
    """The call onto the helper with the `keep` arguments (positional while they stay in place)."""
    from migrator.fix.transforms.args import as_keyword, bind, with_args

    args = bind(call, params)
    if args is None:
        return Declined(UNUSUAL)
    new_args = list(prefix_args or [])
    for i, name in enumerate(keep):
        if name not in args:
            continue
        arg = args[name]
        positional_ok = arg.keyword is None and len(new_args) == i and not prefix_args
        new_args.append(arg if positional_ok else as_keyword(arg, name))
    return with_args(call, helper(ctx, varlen), new_args)
