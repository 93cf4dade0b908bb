"""APEX012 `FusedSGD` -> `torch.optim.SGD`, every default explicit."""

from __future__ import annotations

from typing import TYPE_CHECKING

from migrator.catalogue.site import FIXABLE, CallSite, Declined, Verdict, needs_call

if TYPE_CHECKING:
    import libcst as cst

    from migrator.catalogue.loader import Rule
    from migrator.fix.context import FixContext
    from migrator.ground.model import Finding

LEVEL = "call"
PARAMS = ["params", "lr", "momentum", "dampening", "weight_decay", "nesterov", "wd_after_momentum",
          "materialize_master_grads", "set_grad_none"]
DEFAULTS = {"momentum": "0.0", "dampening": "0.0", "weight_decay": "0.0", "nesterov": "False"}


def precheck(site: CallSite) -> Verdict:
    if (declined := needs_call(site)) is not None:
        return declined
    args = site.bind(PARAMS)
    if args is None or "params" not in args or "lr" not in args:
        return Declined("unusual FusedSGD arguments")
    if "wd_after_momentum" in args and args["wd_after_momentum"].value is not False:
        return Declined("wd_after_momentum=True applies weight decay after momentum; torch.optim.SGD does not")
    if "materialize_master_grads" in args and args["materialize_master_grads"].value is not True:
        return Declined("materialize_master_grads=False has no torch equivalent")
    return FIXABLE


def fix(ctx: FixContext, call: cst.Call, finding: Finding, rule: Rule) -> cst.CSTNode | Declined:
    from migrator.fix.transforms.args import bind, with_args
    from migrator.rules.apex._optim import explicit, first

    args = bind(call, PARAMS)
    if args is None:
        return Declined("unusual FusedSGD arguments")
    kept = explicit(args, ["lr", "momentum", "dampening", "weight_decay", "nesterov"], DEFAULTS)
    return with_args(call, ctx.expr_for("torch.optim.SGD"), [first(args, "params"), *kept])
