"""Apex FusedLayerNorm / FusedRMSNorm: the arguments torch's norms take, Apex's defaults written out."""

from __future__ import annotations

from typing import TYPE_CHECKING

from migrator.catalogue.site import FIXABLE, CallSite, Declined, Verdict, needs_call

if TYPE_CHECKING:
    import libcst as cst

PARAMS = ["normalized_shape", "eps", "elementwise_affine"]


def precheck(site: CallSite, kind: str) -> Verdict:
    if (declined := needs_call(site)) is not None:
        return declined
    if "MixedFused" in site.symbol:
        return Declined(f"MixedFused{kind} keeps fp32 parameters for half inputs; port by hand")
    args = site.bind(PARAMS)
    if args is None or "normalized_shape" not in args:
        return Declined(f"unusual Fused{kind} arguments (torch's norm takes normalized_shape, eps, elementwise_affine)")
    return FIXABLE


def norm_args(call: cst.Call) -> list[cst.Arg] | None:
    from migrator.fix.transforms.args import bind
    from migrator.rules.apex._optim import explicit, first

    args = bind(call, PARAMS)
    if args is None or "normalized_shape" not in args:
        return None
    return [first(args, "normalized_shape"), *explicit(args, ["eps", "elementwise_affine"], {"eps": "1e-5", "elementwise_affine": "True"})]
