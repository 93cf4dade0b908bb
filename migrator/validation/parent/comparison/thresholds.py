"""The numerics.md §3.3 thresholds, one frozen record per category of tensor (parent side, no torch).

Names used throughout: the *golden* run is the original in fp32, the *reference* the original in its
bf16 policy, *target_fp32* / *target_bf16* the migrated program in fp32 / in its bf16 policy. The bf16
*ratio* is ``rel_l2(target_bf16, golden) / max(rel_l2(reference, golden), noise floor, 2e-4)``: the
migrated bf16 error measured against the original's own bf16 error, where the noise floor is that error
measured again on the original's stochastically rounded runs (:class:`ReferenceNoise`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ...verdict import Verdict


@dataclass(frozen=True)
class Bounds:
    """A value passes up to ``pass_at``, warns up to ``warn_at`` and fails above (NaN fails)."""

    pass_at: float
    warn_at: float

    def grade(self, value: float) -> Verdict:
        if math.isnan(value):
            return Verdict.FAIL
        if value <= self.pass_at:
            return Verdict.PASS
        if value <= self.warn_at:
            return Verdict.WARN
        return Verdict.FAIL

    def scaled(self, factor: float) -> Bounds:
        return Bounds(self.pass_at * factor, self.warn_at * factor)


@dataclass(frozen=True)
class Fp32Logic:
    """The logic check of every floating tensor: ``rel_l2(target_fp32, golden)``."""

    bounds: Bounds = Bounds(1e-5, 1e-4)
    cross_device_factor: float = 10.0  # both bounds x this when the two sides ran on different device types

    def for_devices(self, cross_device: bool) -> Bounds:
        return self.bounds.scaled(self.cross_device_factor) if cross_device else self.bounds


@dataclass(frozen=True)
class ActivationThresholds:
    """Forward inputs/outputs and activation grads (the backward of module outputs) under bf16."""

    ratio: Bounds = Bounds(1.5, 2.0)  # the bf16 ratio to golden
    error_balance_warn: float = 0.05  # EB(target_bf16, golden) warns above max(this, 2 x EB(reference, golden))
    error_balance_min_numel: int = 65536  # EB is judged only from this size (below it is sampling noise)
    error_balance_report_numel: int = 4096  # EB(target_bf16, reference) is a report column from this size
    absolute: float = 0.02  # without a reference: rel_l2(target_bf16, golden) of a forward tensor fails above


@dataclass(frozen=True)
class GradientThresholds:
    """Parameter grads under bf16 (and the absolute bound of every grad when there is no reference)."""

    ratio: Bounds = Bounds(3.0, 5.0)  # the bf16 ratio to golden of a parameter grad
    norm_ratio_fail: float = 0.1  # |‖target_bf16‖ / ‖reference‖ - 1| fails above (a lost or doubled reduction)
    absolute: float = 0.1  # without a reference: rel_l2(target_bf16, golden) of any grad fails above


@dataclass(frozen=True)
class LossThresholds:
    """The loss at the compared step."""

    rtol: float = 2.0 ** -8  # |target_bf16 - reference| / |reference| fails above (golden without a reference)


@dataclass(frozen=True)
class ExactThresholds:
    """Integer tensors (routing indices, counts) and masks: compared for equality."""

    bf16_mismatch_warn: float = 0.01  # share of differing elements under bf16 warns above max(this, 2 x reference's)


@dataclass(frozen=True)
class PolicyThresholds:
    """The precision policy read from the activations' dtypes."""

    wider_share: float = 0.5  # a wider dtype than the original's on this share of activations: the policy changed


@dataclass(frozen=True)
class ReferenceNoise:
    """R's bf16 error per tensor is one sample: a port whose ops round elsewhere (a fused op rounding once
    where the eager ops round twice) draws another, and on a small tensor downstream of an ill-conditioned
    op (Mamba's selective scan) two samples differ 4x. The original is run again with every bf16 result
    rounded stochastically (child/stochastic_rounding.py); each such run's ``rel_l2(·, golden)`` times
    ``stochastic_scale`` is another sample of R's error, and the ratio's denominator is the largest. A
    sample whose integer tensors (routing indices, counts) differ from R's took another discrete path
    and is not used."""

    stochastic_scale: float = 0.5 ** 0.5  # stochastic rounding's error variance is twice round-to-nearest's


@dataclass(frozen=True)
class Thresholds:
    """All thresholds of a comparison, by category (numerics.md §3.3 defaults)."""

    fp32: Fp32Logic = Fp32Logic()
    activations: ActivationThresholds = ActivationThresholds()
    gradients: GradientThresholds = GradientThresholds()
    loss: LossThresholds = LossThresholds()
    exact: ExactThresholds = ExactThresholds()
    policy: PolicyThresholds = PolicyThresholds()
    noise: ReferenceNoise = ReferenceNoise()

    @property
    def abs_act(self) -> float:
        """numerics.md's name of the absolute forward bound (``activations.absolute``)."""
        return self.activations.absolute

    @property
    def abs_grad(self) -> float:
        """numerics.md's name of the absolute grad bound (``gradients.absolute``)."""
        return self.gradients.absolute
