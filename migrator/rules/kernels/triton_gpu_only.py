"""KERN016 CUDA-only Triton constructs. Fixed where Triton-Ascend's migration guide and op table give the
rewrite: the GPU device lookup (`triton.runtime.driver.active.get_active_torch_device()`) and libdevice math
with a `tl.math` op of the same name the table supports. TMA descriptors, fp8, warp specialisation and the ops
Triton-Ascend lacks stay manual."""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from migrator.catalogue.site import FIXABLE, CallSite, Declined, Verdict
from migrator.ground.kinds import Target

if TYPE_CHECKING:
    import libcst as cst

    from migrator.fix.context import FixContext
    from migrator.ground.model import Finding

LEVEL = "module"  # deletes statements (the guide's device lookup and its asserts), rewrites every use
LIBDEVICE = ("triton.language.extra.cuda.libdevice.", "triton.language.extra.libdevice.",
             "triton.language.math.libdevice.")
# triton.language.math in upstream Triton 3.2 (Triton-Ascend's base)
TL_MATH = ("abs", "ceil", "cos", "div_rn", "erf", "exp", "exp2", "fdiv", "floor", "fma", "log", "log2", "rsqrt", "sin",
           "sqrt", "sqrt_rn", "umulhi")
PORTABLE_DEVICE = "the guide's device rewrite is for Triton-Ascend: use --target npu"
MANUAL = "no mechanical rewrite on Ascend (TMA, fp8, warp specialisation, ops Triton-Ascend lacks): port it by hand"


def _qualname(symbol: str) -> str:
    # the Triton modules are imported where a Triton site is judged: every scan loads this unit
    from migrator.engine.triton_kernels import TL

    return TL + symbol[3:] if symbol.startswith("tl.") else symbol


def math_name(symbol: str) -> str | None:
    """`tl.extra.cuda.libdevice.exp` -> "exp" when Triton-Ascend's table runs `tl.math.exp`; None otherwise."""
    qual = _qualname(symbol)
    prefix = next((p for p in LIBDEVICE if qual.startswith(p)), None)
    if prefix is None:
        return None
    name = qual[len(prefix):]
    from migrator.catalogue.coverage import triton_ascend

    op = triton_ascend.ops().get(name)
    return name if name in TL_MATH and op is not None and op.status == "supported" else None


def precheck(site: CallSite) -> Verdict:
    from migrator.engine.triton_kernels import ACTIVE_DEVICE

    qual = _qualname(site.symbol)
    if qual == ACTIVE_DEVICE:
        return FIXABLE if site.target == Target.NPU else Declined(PORTABLE_DEVICE)
    if any(qual.startswith(p) for p in LIBDEVICE):
        if math_name(site.symbol) is None:
            return Declined(f"`{qual.rsplit('.', 1)[-1]}`: no `tl.math` op of that name in Triton-Ascend's table; "
                            "write it from the ops it has")
        return FIXABLE
    return Declined(MANUAL)


def fix_module(ctx: FixContext, module: cst.Module, tree: ast.Module, finding: Finding) -> cst.Module | Declined:
    from migrator.engine.triton_kernels import ACTIVE_DEVICE
    from migrator.rules.kernels._device_lookup import drop_device_lookup
    from migrator.rules.kernels._libdevice import to_tl_math

    qual = _qualname(finding.symbol)
    if qual == ACTIVE_DEVICE:
        return drop_device_lookup(ctx, module)
    name = math_name(finding.symbol)
    return to_tl_math(ctx, module, qual, name) if name else Declined(MANUAL)
