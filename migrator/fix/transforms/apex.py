"""Apex optimizers, norms and parallel wrappers rewritten with every default made explicit."""

from __future__ import annotations

import libcst as cst

from migrator.fix.context import FixContext
from migrator.fix.transforms.args import NOT_LITERAL, bind, keep_or_kwarg, kwarg, literal, positional, with_args
from migrator.fix.transforms.helpers import DEVICE_HELPER, RMS_NORM_NPU, apex_amp_helpers
from migrator.fix.transforms.registry import register
from migrator.model import Finding

FUSED_ADAM = ["params", "lr", "bias_correction", "betas", "eps", "adam_w_mode", "weight_decay", "amsgrad",
              "set_grad_none", "capturable", "master_weights"]
FUSED_ADAM_DEFAULTS = {"lr": "1e-3", "betas": "(0.9, 0.999)", "eps": "1e-8", "weight_decay": "0.0"}


def _explicit(args: dict[str, cst.Arg], order: list[str], defaults: dict[str, str]) -> list[cst.Arg]:
    """Every hyper-parameter written out: the user's argument where given, else the old default."""
    picked = (keep_or_kwarg(args, name, defaults.get(name)) for name in order if name in args or name in defaults)
    return [a for a in picked if a is not None]


def _first(args: dict[str, cst.Arg], name: str) -> cst.Arg:
    arg = args[name]
    return arg if arg.keyword is None else positional(arg.value)


@register("apex-fused-adam", level="call")
def fused_adam(ctx: FixContext, call: cst.Call, finding: Finding, rule) -> cst.CSTNode | None:
    args = bind(call, FUSED_ADAM)
    if args is None or "params" not in args:
        ctx.decline(finding, "unusual FusedAdam arguments")
        return None
    for name, ok in (("bias_correction", True), ("amsgrad", False), ("capturable", False), ("master_weights", False)):
        if name in args and literal(args[name]) != ok:
            ctx.decline(finding, f"FusedAdam({name}=...) has no equivalent with the same semantics")
            return None
    mode = literal(args["adam_w_mode"]) if "adam_w_mode" in args else True
    if mode is NOT_LITERAL:
        ctx.decline(finding, "adam_w_mode is not a literal: AdamW (decoupled) or Adam (L2) must be chosen by hand")
        return None
    explicit = _explicit(args, ["lr", "betas", "eps", "weight_decay"], FUSED_ADAM_DEFAULTS)
    params = _first(args, "params")
    name = "torch.optim.AdamW" if mode else "torch.optim.Adam"
    # The fused kernel cannot take GradScaler's grad_scale/found_inf on Ascend (docs torch-optim.md):
    # fused only where this module does no loss scaling. torch_npu's NpuFused* optimizers are not used:
    # they refuse bf16 parameters and zero_grad(set_to_none=True), torch's default since 2.0.
    scaled = any(token in ctx.module_text for token in ("GradScaler", "scale_loss", "amp.initialize"))
    extra = [] if scaled else [kwarg("fused", "True")]
    return with_args(call, ctx.expr_for(name), [params, *explicit, *extra])


FUSED_SGD = ["params", "lr", "momentum", "dampening", "weight_decay", "nesterov", "wd_after_momentum",
             "materialize_master_grads", "set_grad_none"]


@register("apex-fused-sgd", level="call")
def fused_sgd(ctx: FixContext, call: cst.Call, finding: Finding, rule) -> cst.CSTNode | None:
    args = bind(call, FUSED_SGD)
    if args is None or "params" not in args or "lr" not in args:
        ctx.decline(finding, "unusual FusedSGD arguments")
        return None
    if literal(args.get("wd_after_momentum")) not in (None, False):
        ctx.decline(finding, "wd_after_momentum=True applies weight decay after momentum; torch.optim.SGD does not")
        return None
    if literal(args.get("materialize_master_grads")) not in (None, True):
        ctx.decline(finding, "materialize_master_grads=False has no torch equivalent")
        return None
    explicit = _explicit(args, ["lr", "momentum", "dampening", "weight_decay", "nesterov"],
                         {"momentum": "0.0", "dampening": "0.0", "weight_decay": "0.0", "nesterov": "False"})
    return with_args(call, ctx.expr_for("torch.optim.SGD"), [_first(args, "params"), *explicit])


def _norm_args(ctx: FixContext, call: cst.Call, finding: Finding, kind: str) -> list[cst.Arg] | None:
    """(normalized_shape, eps=..., elementwise_affine=...) with Apex's defaults written out."""
    if "MixedFused" in finding.symbol:
        ctx.decline(finding, f"MixedFused{kind} keeps fp32 parameters for half inputs; port by hand")
        return None
    args = bind(call, ["normalized_shape", "eps", "elementwise_affine"])
    if args is None or "normalized_shape" not in args:
        ctx.decline(finding, f"unusual Fused{kind} arguments")
        return None
    explicit = _explicit(args, ["eps", "elementwise_affine"], {"eps": "1e-5", "elementwise_affine": "True"})
    return [_first(args, "normalized_shape"), *explicit]


@register("apex-layer-norm", level="call")
def layer_norm(ctx: FixContext, call: cst.Call, finding: Finding, rule) -> cst.CSTNode | None:
    args = _norm_args(ctx, call, finding, "LayerNorm")
    return None if args is None else with_args(call, ctx.expr_for("torch.nn.LayerNorm"), args)


@register("apex-rms-norm", level="call")
def rms_norm(ctx: FixContext, call: cst.Call, finding: Finding, rule) -> cst.CSTNode | None:
    args = _norm_args(ctx, call, finding, "RMSNorm")
    if args is None:
        return None
    if ctx.target == "npu":
        ctx.needs_torch_npu = True
        func: cst.BaseExpression = ctx.helper("_MigrateRMSNorm", RMS_NORM_NPU)
    else:
        func = ctx.expr_for("torch.nn.RMSNorm")
    return with_args(call, func, args)


APEX_DDP_DROPPED = {"message_size", "delay_allreduce", "shared_param", "allreduce_trigger_params",
                    "retain_allreduce_buffers", "allreduce_always_fp32", "num_allreduce_streams",
                    "allreduce_communicators", "gradient_average", "gradient_predivide_factor", "prof"}


@register("apex-ddp", level="call")
def apex_ddp(ctx: FixContext, call: cst.Call, finding: Finding, rule) -> cst.CSTNode | None:
    if not call.args or call.args[0].keyword is not None or call.args[0].star:
        ctx.decline(finding, "unusual apex DistributedDataParallel arguments")
        return None
    for arg in call.args[1:]:
        name = arg.keyword.value if arg.keyword else None
        if name not in APEX_DDP_DROPPED:
            ctx.decline(finding, f"apex DDP argument `{name}` has no torch DDP equivalent")
            return None
        if name in ("gradient_average", "allreduce_always_fp32") and literal(arg) is not (name == "gradient_average"):
            ctx.decline(finding, f"`{name}` changes gradient arithmetic; port by hand")
            return None
        if name == "gradient_predivide_factor" and literal(arg) not in (1, 1.0):
            ctx.decline(finding, "`gradient_predivide_factor` changes gradient arithmetic; port by hand")
            return None
    return with_args(call, ctx.expr_for("torch.nn.parallel.DistributedDataParallel"), [call.args[0]])


@register("apex-syncbn", level="either")
def syncbn(ctx: FixContext, node: cst.CSTNode, finding: Finding, rule) -> cst.CSTNode | None:
    name = finding.symbol.rsplit(".", 1)[-1]
    if name == "convert_syncbn_model":
        if not isinstance(node, cst.Call):
            ctx.decline(finding, "used as a value")
            return None
        args = bind(node, ["module", "process_group", "channel_last"])
        if args is None or "module" not in args or literal(args.get("channel_last")) not in (None, False):
            ctx.decline(finding, "channel_last SyncBatchNorm has no torch equivalent")
            return None
        new = [positional(args["module"].value)]
        if "process_group" in args:
            new.append(positional(args["process_group"].value))
        return with_args(node, ctx.expr_for("torch.nn.SyncBatchNorm.convert_sync_batchnorm"), new)
    target = ctx.expr_for("torch.nn.SyncBatchNorm")
    return node.with_changes(func=target) if isinstance(node, cst.Call) else target


@register("apex-amp", level="call")
def apex_amp(ctx: FixContext, call: cst.Call, finding: Finding, rule) -> cst.CSTNode | None:
    """amp.initialize / amp.scale_loss onto two helpers (O0/O1; O2/O3 literals stay manual)."""
    if finding.code == "APEX001":
        args = bind(call, ["models", "optimizers", "enabled", "opt_level", "cast_model_type", "patch_torch_functions",
                           "keep_batchnorm_fp32", "master_weights", "loss_scale", "cast_model_outputs", "num_losses",
                           "verbosity", "min_loss_scale", "max_loss_scale"])
        if args is None or "models" not in args:
            ctx.decline(finding, "unusual amp.initialize arguments")
            return None
        level = literal(args["opt_level"]) if "opt_level" in args else "O1"
        if level not in ("O0", "O1", NOT_LITERAL):
            ctx.decline(finding, f"opt_level {level!r} keeps fp16 master weights or a pure fp16 model: port by hand")
            return None
        for name in ("cast_model_type", "patch_torch_functions", "master_weights", "cast_model_outputs", "num_losses"):
            if name in args and literal(args[name]) is not None:
                ctx.decline(finding, f"amp.initialize({name}=...) has no native equivalent")
                return None
        kept = [a for a in call.args if a in (args.get(n) for n in ("models", "optimizers", "opt_level", "loss_scale"))]
        # positional arguments after a dropped one must become keywords
        names = {id(args[n]): n for n in args}
        fixed, positional_ok = [], True
        for original in call.args:
            if original not in kept:
                positional_ok = False
                continue
            name = names[id(original)]
            fixed.append(original if original.keyword is not None or positional_ok else kwarg(name, original.value))
        kept = fixed
        _amp_helpers(ctx)
        return with_args(call, cst.Name("_migrate_amp_initialize"), kept)
    args = bind(call, ["loss", "optimizers", "loss_id", "model", "delay_unscale", "delay_overflow_check"])
    if args is None or "optimizers" not in args or any(k in args for k in ("loss_id", "model", "delay_unscale", "delay_overflow_check")):
        ctx.decline(finding, "amp.scale_loss with several losses or delayed unscaling: port by hand")
        return None
    _amp_helpers(ctx)
    return with_args(call, cst.Name("_migrate_amp_scale_loss"), [args["loss"], args["optimizers"]])


def _amp_helpers(ctx: FixContext) -> None:
    if ctx.target == "npu":
        ctx.needs_torch_npu = True
    else:
        ctx.helper("_migrate_device", DEVICE_HELPER)
    ctx.helper("_migrate_amp_initialize", apex_amp_helpers(ctx.target))
    ctx.imports.add("contextlib")
