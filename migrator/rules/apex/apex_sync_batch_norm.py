"""APEX031 Apex `SyncBatchNorm` / `convert_syncbn_model` -> `torch.nn.SyncBatchNorm` / `convert_sync_batchnorm`.

torch's SyncBatchNorm has no `channel_last` or `fuse_relu`: a literal False is dropped, anything
else is declined (passing it on would be a TypeError)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from migrator.catalogue.site import FIXABLE, CallSite, Declined, Verdict

if TYPE_CHECKING:
    import libcst as cst

    from migrator.catalogue.loader import Rule
    from migrator.fix.context import FixContext
    from migrator.ground.model import Finding

LEVEL = "either"
SYNCBN = ["num_features", "eps", "momentum", "affine", "track_running_stats", "process_group", "channel_last", "fuse_relu"]
CONVERT = ["module", "process_group", "channel_last"]
APEX_ONLY = ("channel_last", "fuse_relu")  # torch.nn.SyncBatchNorm lacks them


def precheck(site: CallSite) -> Verdict:
    convert = site.name == "convert_syncbn_model"
    if not site.called:
        return Declined("convert_syncbn_model used as a value: call torch.nn.SyncBatchNorm.convert_sync_batchnorm") if convert else FIXABLE
    args = site.bind(CONVERT if convert else SYNCBN)
    if args is None or ("module" if convert else "num_features") not in args:
        return Declined("unusual SyncBatchNorm arguments (torch.nn.SyncBatchNorm takes num_features, eps, momentum, "
                        "affine, track_running_stats, process_group)")
    for name in APEX_ONLY:
        if name in args and args[name].value is not False:
            return Declined(f"`{name}` SyncBatchNorm has no torch equivalent: port it by hand")
    return FIXABLE


def fix(ctx: FixContext, node: cst.CSTNode, finding: Finding, rule: Rule) -> cst.CSTNode | Declined:
    import libcst as cst

    from migrator.fix.transforms.args import bind, positional, with_args

    if not isinstance(node, cst.Call):
        return ctx.expr_for("torch.nn.SyncBatchNorm")
    if finding.symbol.rsplit(".", 1)[-1] == "convert_syncbn_model":
        args = bind(node, CONVERT)
        if args is None:
            return Declined("unusual SyncBatchNorm arguments")
        new = [positional(args["module"].value)]
        if "process_group" in args:
            new.append(positional(args["process_group"].value))
        return with_args(node, ctx.expr_for("torch.nn.SyncBatchNorm.convert_sync_batchnorm"), new)
    args = bind(node, SYNCBN)
    if args is None:
        return Declined("unusual SyncBatchNorm arguments")
    kept = [a for a in node.args if not any(a is args.get(name) for name in APEX_ONLY)]
    return with_args(node, ctx.expr_for("torch.nn.SyncBatchNorm"), kept)
