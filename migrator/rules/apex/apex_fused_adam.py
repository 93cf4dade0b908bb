"""APEX010 `FusedAdam` -> `torch.optim.AdamW` (or L2 `Adam`), every default explicit, fused only
where the module does no loss scaling."""

from __future__ import annotations

from typing import TYPE_CHECKING

from migrator.catalogue.site import FIXABLE, NOT_LITERAL, CallSite, Declined, Verdict, needs_call

if TYPE_CHECKING:
    import libcst as cst

    from migrator.catalogue.loader import Rule
    from migrator.fix.context import FixContext
    from migrator.ground.model import Finding

LEVEL = "call"
PARAMS = ["params", "lr", "bias_correction", "betas", "eps", "adam_w_mode", "weight_decay", "amsgrad",
          "set_grad_none", "capturable", "master_weights"]
DEFAULTS = {"lr": "1e-3", "betas": "(0.9, 0.999)", "eps": "1e-8", "weight_decay": "0.0"}
# argument -> the only value torch.optim.AdamW/Adam can honour
MUST_BE = {"bias_correction": True, "amsgrad": False, "capturable": False, "master_weights": False}


def precheck(site: CallSite) -> Verdict:
    if (declined := needs_call(site)) is not None:
        return declined
    args = site.bind(PARAMS)
    if args is None or "params" not in args:
        return Declined("unusual FusedAdam arguments")
    for name, ok in MUST_BE.items():
        if name in args and args[name].value != ok:
            return Declined(f"FusedAdam({name}=...) has no equivalent with the same semantics")
    if "adam_w_mode" in args and args["adam_w_mode"].value is NOT_LITERAL:
        return Declined("adam_w_mode is not a literal: AdamW (decoupled) or Adam (L2) must be chosen by hand")
    return FIXABLE


def fix(ctx: FixContext, call: cst.Call, finding: Finding, rule: Rule) -> cst.CSTNode | Declined:
    from migrator.fix.transforms.args import bind, kwarg, literal, with_args
    from migrator.rules.apex._optim import explicit, first

    args = bind(call, PARAMS)
    if args is None:
        return Declined("unusual FusedAdam arguments")
    mode = literal(args["adam_w_mode"]) if "adam_w_mode" in args else True
    name = "torch.optim.AdamW" if mode else "torch.optim.Adam"
    # The fused kernel cannot take GradScaler's grad_scale/found_inf on Ascend (docs torch-optim.md):
    # fused only where this module does no loss scaling. torch_npu's NpuFused* optimizers are not used:
    # they refuse bf16 parameters and zero_grad(set_to_none=True), torch's default since 2.0.
    scaled = any(token in ctx.module_text for token in ("GradScaler", "scale_loss", "amp.initialize"))
    extra = [] if scaled else [kwarg("fused", "True")]
    return with_args(call, ctx.expr_for(name), [first(args, "params"), *explicit(args, ["lr", "betas", "eps", "weight_decay"], DEFAULTS), *extra])
