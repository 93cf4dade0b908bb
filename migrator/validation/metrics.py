"""Per-tensor error metrics, computed in float64 (numerics.md §2 metric table, §3.3).

Gating metrics:

* ``rel_l2(t, r) = ‖t − r‖₂ / ‖r‖₂``;
* ``ratio(e_t, e_r) = e_t / max(e_r, 2e-4)`` — the double-benchmark ratio of §3.3, with
  ``e = rel_l2(·, golden)``;
* ``error_balance(t, r) = |#(t > r) − #(t < r)| / N``;
* ``norm_ratio(t, r) = ‖t‖ / ‖r‖``.

Report-only columns (msprobe's vocabulary, §1.1): ``cosine`` (fp64: in fp32 it is off by ~1e-4
over 1e6 elements, more than the bf16 signal), ``max_abs``, ``max_rel`` / ``mean_rel`` over the
elements with ``|r| > 2^-10`` (msprobe's small-value rule for bf16), ``thousandth`` (share of
elements whose relative error is below 1e-3; msprobe's "One Thousandth Err Ratio").

Every function accepts tensors of any floating or integer dtype and shape (flattened); shapes
must agree (the comparator reports mismatched shapes as "unmatched" before calling these).
Non-finite values propagate as ``inf`` (never NaN) so that a verdict can always be taken.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from torch import Tensor

RATIO_FLOOR = 2e-4  # §3.3: about 1/20 of the bf16 unit roundoff
SMALL_VALUE = 2.0 ** -10  # msprobe bf16/fp16 small-value boundary (§1.1)
THOUSANDTH = 1e-3

INF = float("inf")


def _f64(x: Tensor) -> Tensor:
    return x.detach().reshape(-1).to("cpu").double()


def _finite(x: Tensor) -> bool:
    import torch

    return bool(torch.isfinite(x).all())


def rel_l2(t: Tensor, r: Tensor) -> float:
    """``‖t − r‖ / ‖r‖``; 0 when both are zero, ``inf`` when only ``r`` is zero or ``t`` is not finite."""
    t64, r64 = _f64(t), _f64(r)
    if not _finite(t64) or not _finite(r64):
        same = bool(((t64 == r64) | (t64.isnan() & r64.isnan())).all())
        return 0.0 if same else INF
    nr = float(r64.norm())
    nd = float((t64 - r64).norm())
    if nr == 0.0:
        return 0.0 if nd == 0.0 else INF
    return nd / nr


def ratio(err_t: float, err_r: float, floor: float = RATIO_FLOOR) -> float:
    """Double-benchmark ratio ``err_t / max(err_r, floor)`` (§3.3)."""
    if math.isinf(err_t) or math.isnan(err_t):
        return INF
    return err_t / max(err_r if math.isfinite(err_r) else floor, floor)


def cosine(t: Tensor, r: Tensor) -> float:
    """Cosine similarity in fp64; 1.0 when both are zero, 0.0 when only one is."""
    t64, r64 = _f64(t), _f64(r)
    if not _finite(t64) or not _finite(r64):
        return 0.0
    nt, nr = float(t64.norm()), float(r64.norm())
    if nt == 0.0 and nr == 0.0:
        return 1.0
    if nt == 0.0 or nr == 0.0:
        return 0.0
    return float(t64 @ r64) / (nt * nr)


def max_abs(t: Tensor, r: Tensor) -> float:
    d = (_f64(t) - _f64(r)).abs()
    if d.numel() == 0:
        return 0.0
    value = float(d.max())
    return INF if math.isnan(value) else value


def _rel_errors(t64: Tensor, r64: Tensor) -> Tensor:
    big = r64.abs() > SMALL_VALUE
    return ((t64 - r64).abs()[big] / r64.abs()[big])


def max_rel(t: Tensor, r: Tensor) -> float:
    """Largest ``|t − r| / |r|`` over elements with ``|r| > 2^-10`` (msprobe's small-value rule)."""
    e = _rel_errors(_f64(t), _f64(r))
    if e.numel() == 0:
        return 0.0
    value = float(e.max())
    return INF if math.isnan(value) else value


def mean_rel(t: Tensor, r: Tensor) -> float:
    e = _rel_errors(_f64(t), _f64(r))
    if e.numel() == 0:
        return 0.0
    value = float(e.mean())
    return INF if math.isnan(value) else value


def thousandth(t: Tensor, r: Tensor) -> float:
    """Share of elements with relative error below 1e-3 (exact zeros in ``r`` count as agreeing
    only when ``t`` is zero there too)."""
    import torch

    t64, r64 = _f64(t), _f64(r)
    if t64.numel() == 0:
        return 1.0
    diff = (t64 - r64).abs()
    rel = torch.where(r64 == 0, torch.where(diff == 0, torch.zeros_like(diff), torch.full_like(diff, INF)),
                      diff / r64.abs())
    return float((rel < THOUSANDTH).double().mean())


def error_balance(t: Tensor, r: Tensor) -> float:
    """``|#(t > r) − #(t < r)| / N`` (msprobe's EB, §1.1); 0 for empty tensors."""
    t64, r64 = _f64(t), _f64(r)
    n = t64.numel()
    if n == 0:
        return 0.0
    return abs(int((t64 > r64).sum()) - int((t64 < r64).sum())) / n


def norm_ratio(t: Tensor, r: Tensor) -> float:
    """``‖t‖ / ‖r‖`` (1.0 when both are zero)."""
    nt, nr = float(_f64(t).norm()), float(_f64(r).norm())
    if nr == 0.0:
        return 1.0 if nt == 0.0 else INF
    if math.isnan(nt):
        return INF
    return nt / nr


MASKED_BELOW = -1e4  # an additive attention mask's value at or below this masks the key


def mismatch_fraction(t: Tensor, r: Tensor) -> float:
    """Share of elements that differ (exact compare, for integer tensors such as routing indices).
    A bool mask against an additive float mask (0 keep, -inf masked) compares the pattern they
    encode, in whichever polarity the bool one uses: two encodings of one attention mask agree."""
    tt, rr = t.detach().reshape(-1).to("cpu"), r.detach().reshape(-1).to("cpu")
    if tt.numel() == 0:
        return 0.0
    if (str(tt.dtype) == "torch.bool") != (str(rr.dtype) == "torch.bool"):
        flags, additive = (tt, rr) if str(tt.dtype) == "torch.bool" else (rr, tt)
        if additive.is_floating_point():
            keep = additive > MASKED_BELOW
            return float(min((flags != keep).double().mean(), (flags != ~keep).double().mean()))
    return float((tt != rr).double().mean())


def stats(t: Tensor) -> dict[str, float | None]:
    """msprobe's per-tensor statistics ``Max, Min, Mean, Norm`` (plain floats; ``None`` when empty)."""
    x = _f64(t)
    if x.numel() == 0:
        return {"Max": None, "Min": None, "Mean": None, "Norm": None}
    return {"Max": _num(x.max()), "Min": _num(x.min()), "Mean": _num(x.mean()), "Norm": _num(x.norm())}


def report_columns(t: Tensor, r: Tensor) -> dict[str, float]:
    """msprobe's report-only columns for one pair (not gated on)."""
    return {"cosine": cosine(t, r), "max_abs": max_abs(t, r), "max_rel": max_rel(t, r),
            "thousandth": thousandth(t, r)}


def _num(v: Tensor | float) -> float | None:
    value = float(v)
    if math.isnan(value):
        return None
    return value


__all__ = ["rel_l2", "ratio", "cosine", "max_abs", "max_rel", "mean_rel", "thousandth", "error_balance",
           "norm_ratio", "mismatch_fraction", "stats", "report_columns", "RATIO_FLOOR", "SMALL_VALUE"]
