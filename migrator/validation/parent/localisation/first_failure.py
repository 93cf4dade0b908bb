"""Localisation of a comparison (parent side): the first failing tensor in forward order (forward
tensors and routing, then the loss, then backward, parameter grads and optimizer updates), fp32 logic
failures first, named by its *scope* module — where the diverging value was computed; plus the worst
rows per category and the verdict counts the result shows."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TypedDict

from ...verdict import Verdict
from ..comparison.compare import ORDER, Check, TensorVerdict


@dataclass(frozen=True)
class Localisation:
    tensor: str
    module: str
    metric: str
    value: float
    threshold: float
    note: str = ""

    def text(self) -> str:
        return (f"{self.module}: first failing tensor {self.tensor} "
                f"({self.metric} {_fmt(self.value)} > {_fmt(self.threshold)})" + (f"; {self.note}" if self.note else ""))


def _fmt(v: float) -> str:
    if math.isinf(v):
        return "inf"
    return f"{v:.3g}"


def module_label(v: TensorVerdict) -> str:
    if v.category == "loss":
        return "loss_fn"
    if v.category in ("optimizer", "training"):
        what = "optimizer" if v.category == "optimizer" else "training step (train_step, optimizer)"
        return f"{what} ({v.scope_cls})" if v.scope_cls else what
    if v.scope is None:
        return "inputs (make_batch)"
    return f"{v.scope} ({v.scope_cls})" if v.scope_cls else v.scope


def _common_factor(verdicts: list[TensorVerdict]) -> float | None:
    """The grad-norm factor shared by these parameter grads (within 1 %), if any."""
    found = [v.columns.get("norm_ratio_fp32") for v in verdicts]
    factors = [f for f in found if f is not None and math.isfinite(f) and f > 0]
    if not factors or len(factors) < len(verdicts):
        return None
    lo, hi = min(factors), max(factors)
    if abs(hi / lo - 1) > 0.01 or abs(lo - 1) < 0.01:
        return None
    return (lo + hi) / 2


def localise(verdicts: list[TensorVerdict]) -> Localisation | None:
    """First failing tensor in forward order; fp32 logic failures take precedence. When only
    parameter grads fail and they share one scale factor, the reduction is named: with (nearly)
    every grad off it is the gradient reduction itself, else the first off module plus the factor."""
    failing = [v for v in verdicts if v.status == Verdict.FAIL]
    if not failing:
        return None
    for metric_group in (("rel_l2_fp32", "mismatch_fp32", "grad_missing", "norm_rel_fp32", "train_rel_l2_fp32"), None):
        candidates = []
        for v in failing:
            bad = [c for c in v.checks if c.status == Verdict.FAIL and (metric_group is None or c.metric in metric_group)]
            if bad:
                candidates.append((v, bad[0]))
        if not candidates:
            continue
        v, c = min(candidates, key=lambda vc: (vc[0].order, vc[0].label))
        module, note = module_label(v), ""
        failed_categories = {x.category for x, _ in candidates}
        if failed_categories == {"param_grad"}:
            group = v.label.split("/")[0]
            grads = [x for x in verdicts if x.category == "param_grad" and x.label.split("/")[0] == group]
            bad_grads = [x for x, _ in candidates if x.label.split("/")[0] == group]
            factor = _common_factor(bad_grads)
            if factor is not None:
                note = f"{len(bad_grads)} of {len(grads)} parameter grads scaled by {factor:.3g}"
                if len(bad_grads) >= 0.9 * len(grads):
                    module = "gradient reduction (the parallel wrapper / sync_grads)"
                else:
                    note += " (a reduction or scaling factor on these parameters only)"
        return Localisation(tensor=f"{v.label}{v.name}", module=module, metric=c.metric, value=c.value,
                            threshold=c.threshold, note=note)
    return None


MSPROBE_COLUMNS = ("cosine", "max_abs", "max_rel", "thousandth")  # report-only, against R

PRIMARY = {"forward": ("ratio", "rel_l2_abs"), "backward": ("ratio", "rel_l2_abs"),
           "param_grad": ("ratio", "rel_l2_abs"), "loss": ("loss_rel",), "optimizer": ("rel_l2_fp32",),
           "routing": ("mismatch_fp32", "mismatch_bf16"), "training": ("train_rel_l2_fp32", "train_ratio")}


class WorstRow(TypedDict, total=False):
    """One row of a stage's ``worst`` list (``$defs/worst`` of ``validation.schema.json``)."""

    tensor: str
    category: str
    metric: str
    value: float
    threshold: float
    status: Verdict
    module: str
    msprobe: dict[str, float]


def worst_rows(verdicts: list[TensorVerdict], per_group: int = 3, limit: int = 24) -> list[WorstRow]:
    """The schema's ``worst`` rows, worst first: per category the top tensors by its gating metric
    (the bf16 ratio; the loss difference; the fp32 rel_l2 of optimizer updates), the worst fp32
    logic value, and every other check that warned or failed."""
    groups: dict[tuple[str, str], list[tuple[tuple[int, float], TensorVerdict, Check]]] = {}
    for v in verdicts:
        for c in v.checks:
            groups.setdefault((v.category, c.metric), []).append((_sort_key(c), v, c))
    rows: list[WorstRow] = []
    for (category, metric), items in groups.items():
        items.sort(key=lambda x: x[0], reverse=True)
        primary = metric in PRIMARY.get(category, ())
        if primary:
            chosen = items[:per_group]
        elif metric == "rel_l2_fp32":
            chosen = items[:1] + [x for x in items[1:per_group] if x[2].status != Verdict.PASS]
        else:
            chosen = [x for x in items[:per_group] if x[2].status != Verdict.PASS]
        for _, v, c in chosen:
            row: WorstRow = {"tensor": f"{v.label}{v.name}", "category": category, "metric": metric,
                   "value": _json_num(c.value), "threshold": _json_num(c.threshold), "status": c.status,
                   "module": module_label(v)}
            msprobe = {k: _json_num(v.columns[k]) for k in MSPROBE_COLUMNS if v.columns.get(k) is not None}
            if msprobe:
                row["msprobe"] = msprobe
            rows.append(row)
    rows.sort(key=lambda r: (-Verdict(r["status"]).severity, ORDER.get(r["category"], 9), r["metric"] != "ratio",
                             r["metric"], -r["value"]))
    return rows[:limit]


def _sort_key(c: Check) -> tuple[int, float]:
    scale = c.threshold if c.threshold > 0 else 1.0
    value = c.value / scale if math.isfinite(c.value) else math.inf
    return Verdict(c.status).severity, value


def _json_num(v: float) -> float:
    if math.isnan(v) or math.isinf(v):
        return 1.7976931348623157e308
    return float(v)


def summary_counts(verdicts: list[TensorVerdict]) -> dict[str, dict[str, int]]:
    counts: dict[str, dict[str, int]] = {}
    for v in verdicts:
        bucket = counts.setdefault(v.category, {Verdict.PASS.value: 0, Verdict.WARN.value: 0, Verdict.FAIL.value: 0})
        bucket[v.status] += 1
    return counts
