"""APEX030 Apex `DistributedDataParallel` -> `torch.nn.parallel.DistributedDataParallel(module)`."""

from __future__ import annotations

from typing import TYPE_CHECKING

from migrator.catalogue.site import FIXABLE, CallSite, Declined, Verdict, needs_call

if TYPE_CHECKING:
    import libcst as cst

    from migrator.catalogue.loader import Rule
    from migrator.fix.context import FixContext
    from migrator.ground.model import Finding

LEVEL = "call"
# Apex-only options that torch DDP does without (bucketing, streams, communicators, profiling)
DROPPED = {"message_size", "delay_allreduce", "shared_param", "allreduce_trigger_params",
           "retain_allreduce_buffers", "allreduce_always_fp32", "num_allreduce_streams",
           "allreduce_communicators", "gradient_average", "gradient_predivide_factor", "prof"}


def precheck(site: CallSite) -> Verdict:
    if (declined := needs_call(site)) is not None:
        return declined
    if not site.args or site.args[0].keyword is not None:
        return Declined("unusual apex DistributedDataParallel arguments")
    for arg in site.args[1:]:
        if arg.keyword not in DROPPED:
            return Declined(f"apex DDP argument `{arg.keyword}` has no torch DDP equivalent")
        if arg.keyword in ("gradient_average", "allreduce_always_fp32") and arg.value is not (arg.keyword == "gradient_average"):
            return Declined(f"`{arg.keyword}` changes gradient arithmetic; port by hand")
        if arg.keyword == "gradient_predivide_factor" and arg.value not in (1, 1.0):
            return Declined("`gradient_predivide_factor` changes gradient arithmetic; port by hand")
    return FIXABLE


def fix(ctx: FixContext, call: cst.Call, finding: Finding, rule: Rule) -> cst.CSTNode | Declined:
    from migrator.fix.transforms.args import with_args

    return with_args(call, ctx.expr_for("torch.nn.parallel.DistributedDataParallel"), [call.args[0]])
