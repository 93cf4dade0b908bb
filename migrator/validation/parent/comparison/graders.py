"""Per-category graders of one tensor (parent side): each turns the tensor's values in the four runs into
named checks and report columns, against its category's thresholds (:mod:`.thresholds`).

* :func:`grade_exact`: integer tensors (routing indices, counts) and masks must be equal;
* :func:`grade_fp32`: the fp32 logic check of every floating tensor;
* :func:`grade_loss`, :func:`grade_param_grad`, :func:`grade_activation`: the bf16 checks against the
  reference; :func:`grade_absolute` the bf16 bounds when there is no reference run.

torch is imported only by :mod:`..metrics` when a grader runs.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ... import metrics as M
from ...verdict import Verdict
from .thresholds import ActivationThresholds, Bounds, ExactThresholds, GradientThresholds, LossThresholds, Thresholds


@dataclass(frozen=True)
class Check:
    """One named check of one tensor: the measured value, the bound it was held to, the verdict."""

    metric: str
    value: float
    threshold: float
    status: Verdict


@dataclass(frozen=True)
class Tensors:
    """One tensor in the runs compared (each of the golden's shape, else None)."""

    golden: Any
    under_test: Any  # target_bf16's, or target_fp32's when no bf16 run is compared
    target_fp32: Any | None
    reference: Any | None
    bf16: bool  # ``under_test`` is the migrated bf16 run (the bf16 checks apply)
    noise_floor: float = 0.0  # R's error measured again on the original's stochastically rounded runs (0: none)

    @property
    def ref(self) -> Any:
        """The reference's tensor, for the graders the table runs only when there is one."""
        if self.reference is None:
            raise ValueError("a reference-relative grader ran without a reference run")
        return self.reference


@dataclass
class Graded:
    """What the graders found for one tensor (added to in order: fp32 checks first)."""

    checks: list[Check] = field(default_factory=list)
    columns: dict[str, float] = field(default_factory=dict)


def grade_exact(x: Tensors, th: ExactThresholds) -> Graded:
    """fp32: not one element may differ; bf16: differing elements warn above max(the floor, 2 x reference's)."""
    out = Graded()
    if x.target_fp32 is not None:
        mismatch = M.mismatch_fraction(x.target_fp32, x.golden)
        out.checks.append(Check("mismatch_fp32", mismatch, 0.0, Verdict.PASS if mismatch == 0.0 else Verdict.FAIL))
    if x.bf16:
        mismatch = M.mismatch_fraction(x.under_test, x.golden)
        own = M.mismatch_fraction(x.reference, x.golden) if x.reference is not None else 0.0
        limit = max(2 * own, th.bf16_mismatch_warn)
        out.checks.append(Check("mismatch_bf16", mismatch, limit, Verdict.PASS if mismatch <= limit else Verdict.WARN))
    return out


def grade_fp32(x: Tensors, category: str, bounds: Bounds, out: Graded) -> None:
    """``rel_l2(target_fp32, golden)`` (and a parameter grad's norm ratio as a column)."""
    if x.target_fp32 is None:
        return
    error = M.rel_l2(x.target_fp32, x.golden)
    out.checks.append(Check("rel_l2_fp32", error, bounds.warn_at, bounds.grade(error)))
    if category == "param_grad":
        out.columns["norm_ratio_fp32"] = M.norm_ratio(x.target_fp32, x.golden)


def grade_loss(x: Tensors, th: LossThresholds, out: Graded) -> None:
    """The bf16 loss against the reference's (the golden's without one), relative."""
    ref = x.reference if x.reference is not None else x.golden
    expected = float(ref.double())
    rel = abs(float(x.under_test.double()) - expected) / max(abs(expected), 1e-30)
    out.checks.append(Check("loss_rel", rel, th.rtol, Verdict.PASS if rel <= th.rtol else Verdict.FAIL))


def grade_param_grad(x: Tensors, th: GradientThresholds, out: Graded) -> None:
    """The bf16 ratio to golden and the grad-norm ratio to the reference (a lost or doubled reduction)."""
    ratio, columns = _ratio(x)
    out.checks.append(Check("ratio", ratio, th.ratio.warn_at, th.ratio.grade(ratio)))
    norm_off = abs(M.norm_ratio(x.under_test, x.ref) - 1.0)
    out.checks.append(Check("grad_norm", norm_off, th.norm_ratio_fail,
                            Verdict.PASS if norm_off <= th.norm_ratio_fail else Verdict.FAIL))
    out.columns.update(columns)


def grade_activation(x: Tensors, category: str, th: ActivationThresholds, out: Graded) -> None:
    """The bf16 ratio to golden; a forward tensor's error balance against the golden, above the reference's."""
    ratio, columns = _ratio(x)
    out.checks.append(Check("ratio", ratio, th.ratio.warn_at, th.ratio.grade(ratio)))
    t, r, g = x.under_test, x.ref, x.golden
    if category == "forward" and t.numel() >= th.error_balance_report_numel:
        out.columns["error_balance_vs_ref"] = M.error_balance(t, r)
    if category == "forward" and t.numel() >= th.error_balance_min_numel:
        balance, own = M.error_balance(t, g), M.error_balance(r, g)
        limit = max(th.error_balance_warn, 2.0 * own)
        out.checks.append(Check("error_balance", balance, limit, Verdict.PASS if balance <= limit else Verdict.WARN))
    out.columns.update(columns)


def grade_absolute(x: Tensors, category: str, th: Thresholds, out: Graded) -> None:
    """Without a reference: ``rel_l2(target_bf16, golden)`` against the absolute bound of its category."""
    error = M.rel_l2(x.under_test, x.golden)
    bound = th.gradients.absolute if category in ("param_grad", "backward") else th.activations.absolute
    out.checks.append(Check("rel_l2_abs", error, bound, Verdict.PASS if error <= bound else Verdict.FAIL))
    out.columns.update(M.report_columns(x.under_test, x.golden))
    out.columns.update(rel_l2_vs_golden=error)


def _ratio(x: Tensors) -> tuple[float, dict[str, float]]:
    """The bf16 ratio to golden, and the report columns against the reference (msprobe's, both rel_l2)."""
    error = M.rel_l2(x.under_test, x.golden)
    own = M.rel_l2(x.ref, x.golden)
    columns = dict(M.report_columns(x.under_test, x.ref))
    columns.update(rel_l2_vs_golden=error, rel_l2_ref_vs_golden=own)
    if x.noise_floor > 0.0:
        columns.update(ref_noise_floor=x.noise_floor)
    return M.ratio(error, max(own if math.isfinite(own) else 0.0, x.noise_floor)), columns


def grade_bf16(x: Tensors, category: str, th: Thresholds, out: Graded) -> None:
    """The bf16 checks of a floating tensor's category (an optimizer update has none: fp32 only)."""
    if category == "loss":
        grade_loss(x, th.loss, out)
    elif category == "optimizer":
        return
    elif x.reference is None:
        grade_absolute(x, category, th, out)
    else:
        BF16_GRADERS.get(category, _activation)(x, category, th, out)


def _param_grad(x: Tensors, category: str, th: Thresholds, out: Graded) -> None:
    grade_param_grad(x, th.gradients, out)


def _activation(x: Tensors, category: str, th: Thresholds, out: Graded) -> None:
    grade_activation(x, category, th.activations, out)


# the grader of each category compared against a reference (any other category: an activation)
BF16_GRADERS: dict[str, Callable[[Tensors, str, Thresholds, Graded], None]] = {"param_grad": _param_grad}
