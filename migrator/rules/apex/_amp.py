"""APEX001/APEX002 `amp.initialize` / `amp.scale_loss` onto two helpers: float16 autocast and dynamic
loss scaling (O0/O1; a literal O2/O3 and the options with no native equivalent stay manual)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from migrator.catalogue.site import FIXABLE, NOT_LITERAL, CallSite, Declined, Verdict, needs_call
from migrator.ground.kinds import Target

if TYPE_CHECKING:
    import libcst as cst

    from migrator.catalogue.loader import Rule
    from migrator.fix.context import FixContext
    from migrator.ground.model import Finding

LEVEL = "call"
INITIALIZE = ["models", "optimizers", "enabled", "opt_level", "cast_model_type", "patch_torch_functions",
              "keep_batchnorm_fp32", "master_weights", "loss_scale", "cast_model_outputs", "num_losses",
              "verbosity", "min_loss_scale", "max_loss_scale"]
NO_EQUIVALENT = ("cast_model_type", "patch_torch_functions", "master_weights", "cast_model_outputs", "num_losses")
KEPT = ("models", "optimizers", "opt_level", "loss_scale")
SCALE_LOSS = ["loss", "optimizers", "loss_id", "model", "delay_unscale", "delay_overflow_check"]


def precheck(site: CallSite) -> Verdict:
    if (declined := needs_call(site)) is not None:
        return declined
    if site.code == "APEX001":
        args = site.bind(INITIALIZE)
        if args is None or "models" not in args:
            return Declined("unusual amp.initialize arguments")
        level = args["opt_level"].value if "opt_level" in args else "O1"
        if level not in ("O0", "O1") and level is not NOT_LITERAL:
            return Declined(f"opt_level {level!r} keeps fp16 master weights or a pure fp16 model: port by hand")
        for name in NO_EQUIVALENT:
            if name in args and args[name].value is not None:
                return Declined(f"amp.initialize({name}=...) has no native equivalent")
        return FIXABLE
    args = site.bind(SCALE_LOSS)
    if args is None or "optimizers" not in args or any(k in args for k in SCALE_LOSS[2:]):
        return Declined("amp.scale_loss with several losses or delayed unscaling: port by hand")
    return FIXABLE


def fix(ctx: FixContext, call: cst.Call, finding: Finding, rule: Rule) -> cst.CSTNode | Declined:
    import libcst as cst

    from migrator.fix.transforms.args import as_keyword, bind, with_args

    if finding.code == "APEX001":
        args = bind(call, INITIALIZE)
        if args is None:
            return Declined("unusual amp.initialize arguments")
        names = {id(arg): name for name, arg in args.items()}
        kept, positional_ok = [], True
        for original in call.args:  # positional arguments after a dropped one become keywords
            name = names[id(original)]
            if name not in KEPT:
                positional_ok = False
                continue
            kept.append(original if positional_ok else as_keyword(original, name))
        _helpers(ctx)
        return with_args(call, cst.Name("_migrate_amp_initialize"), kept)
    args = bind(call, SCALE_LOSS)
    if args is None:
        return Declined("amp.scale_loss with several losses or delayed unscaling: port by hand")
    _helpers(ctx)
    return with_args(call, cst.Name("_migrate_amp_scale_loss"), [args["loss"], args["optimizers"]])


def _helpers(ctx: FixContext) -> None:
    from migrator.fix.transforms.helpers import DEVICE_HELPER, apex_amp_helpers

    if ctx.target == Target.NPU:
        ctx.needs_torch_npu = True
    else:
        ctx.helper("_migrate_device", DEVICE_HELPER)
    ctx.helper("_migrate_amp_initialize", apex_amp_helpers(ctx.target))
    ctx.imports.add("contextlib")
