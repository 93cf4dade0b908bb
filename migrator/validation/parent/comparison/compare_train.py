"""S1's optimizer truth: the parameter updates after k real training steps (parent side).

Both sides ran ``execute.TRAIN_STEPS`` steps of the program's own step (``train_step``: scaled
backward, ``unscale_``, clipping, ``step``) from the same bf16-rounded weights and batches, in fp32
(G, T32) and in the bf16 policy (R, T16); each recorded ``p_k − p_0`` per parameter in fp32. A
lost ``unscale_`` before clipping, a wrong learning rate, betas, eps or weight decay all move these
updates while leaving step-0 grads untouched.

* fp32 logic: ``rel_l2(ΔT32, ΔG)`` per parameter, pass ≤ 1e-4, warn ≤ 1e-3 (looser than a single
  step's 1e-5: Adam divides by √v, so fp32 noise in a grad near 0 moves its update by up to lr;
  measured on samples/gpt: ≤ 1.1e-5 for the correct migration);
* bf16 tolerance: ``rel_l2(ΔT16, ΔG) / max(rel_l2(ΔR, ΔG), median over parameters of rel_l2(ΔR, ΔG),
  rel_l2(ΔR', ΔG) / √2, 2e-4)`` with the parameter-grad thresholds (pass ≤ 3, warn ≤ 5); R' is the
  original's bf16 training with every bf16 result rounded stochastically (``thresholds.ReferenceNoise``;
  measured on tests/validation/families/mamba.py's hand port: ΔT16 8x ΔR on an EMA buffer, R' 2-3x ΔR
  on the same tensors). The median: after k Adam steps one
  parameter's bf16 error is one noisy sample (sign flips of grads near 0 move an update by up to lr), and
  R's may be small by chance where T's is not; measured on a correct SwiGLU → ``npu_swiglu`` hand port
  (tests/validation/llama_family.py): ΔR 4.9e-3 vs ΔT16 4.4e-2 on one matrix, with R 2-7 % on the others.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from ... import metrics as M
from ...facts import TrainingFacts
from ...verdict import Verdict, worst
from .compare import Check, Comparison, Run, TensorVerdict, Thresholds
from .thresholds import Bounds

TRAIN_FP32 = Bounds(1e-4, 1e-3)  # rel_l2(ΔT32, ΔG) after k steps (see the module docstring)
_DEFAULT = Thresholds()
ORDER = 5_000_000  # after the step-0 tensors and the isolated optimizer


def compare_training(golden: Run | None, reference: Run | None, target_fp32: Run | None, target_bf16: Run | None,
                     *, th: Thresholds = _DEFAULT, cross_device: bool = False,
                     golden_noise: Run | None = None, reference_noise: Run | None = None) -> Comparison:
    """Verdicts on every parameter's update after k steps (golden/reference: the original's fp32/bf16 runs;
    ``*_noise``: the same runs with the weights nudged by fp32 rounding, the bf16 one also rounding every bf16
    result stochastically: each update's measured noise floor)."""
    out = Comparison()
    fp32 = TRAIN_FP32.scaled(th.fp32.cross_device_factor) if cross_device else TRAIN_FP32
    ratio_bounds = th.gradients.ratio
    under_test = target_fp32 or target_bf16
    if under_test is None or golden is None:
        return out
    typical = _typical_error(golden, reference)
    scale = typical_scale(t for e in golden.events if (t := golden.tensor(e.match)) is not None)
    for order, event in enumerate(under_test.events):
        match = event.match
        g = golden.tensor(match)
        checks: list[Check] = []
        if g is None:
            out.unmatched.append(f"train/{event.name} (not in the original's training run)")
            checks.append(Check("unmatched", 1.0, 0.0, Verdict.FAIL))
        else:
            error = error_against(g, scale)
            t32 = target_fp32.tensor(match) if target_fp32 is not None else None
            if t32 is not None and tuple(t32.shape) == tuple(g.shape):
                e = error(t32)
                bounds = _with_floor(fp32, _noise(golden_noise, match, g, error))
                checks.append(Check("train_rel_l2_fp32", e, bounds.warn_at, bounds.grade(e)))
            t16 = target_bf16.tensor(match) if target_bf16 is not None else None
            r = reference.tensor(match) if reference is not None else None
            if t16 is not None and r is not None and tuple(t16.shape) == tuple(r.shape) == tuple(g.shape):
                sampled = th.noise.stochastic_scale * _noise(reference_noise, match, g, error)
                ratio = M.ratio(error(t16), max(error(r), typical, sampled))
                checks.append(Check("train_ratio", ratio, ratio_bounds.warn_at, ratio_bounds.grade(ratio)))
        if not checks:
            continue
        out.verdicts.append(TensorVerdict(
            name=event.name, match=match, category="training", scope="training",
            scope_cls=event.cls, order=ORDER + order, status=worst(c.status for c in checks), checks=tuple(checks),
            label="train/", npu=event, bench=golden.by_match.get(match)))
    return out


FLOOR_PASS, FLOOR_WARN = 3.0, 10.0  # an fp32 update passes up to 3x, warns up to 10x its measured noise floor


def _noise(run: Run | None, match: str, g: Any, error: Callable[[Any], float]) -> float:
    """How far this update moved in the original's own nudged run (0 without one); never infinite."""
    n = run.tensor(match) if run is not None else None
    if n is None or tuple(n.shape) != tuple(g.shape):
        return 0.0
    e = error(n)
    return e if math.isfinite(e) else 0.0


def _with_floor(bounds: Bounds, noise: float) -> Bounds:
    """``bounds`` widened to the update's noise floor: an update that fp32 rounding alone moves by 1e-3 (Adam
    dividing by √v of a gradient near 0) cannot be judged to 1e-4."""
    return Bounds(max(bounds.pass_at, FLOOR_PASS * noise), max(bounds.warn_at, FLOOR_WARN * noise))


def error_against(g: Any, scale: float) -> Callable[[Any], float]:
    """``rel_l2(·, ΔG)``; where the golden update is degenerate (all zero: a bias before a norm layer that
    cancels it, or non-finite), the distance to it in units of a typical update of this size instead, so two
    bf16 sides that both moved by rounding noise are compared with each other, not with infinity. Also the
    msprobe comparison's measure of one optimizer update (`interop/msprobe_updates.py`)."""
    import torch

    g64 = g.double()
    if bool(torch.isfinite(g64).all()) and float(g64.norm()) > 0.0:
        return lambda t: M.rel_l2(t, g)
    unit = scale * math.sqrt(max(g.numel(), 1))

    def error(t: Any) -> float:
        distance = float((t.double() - torch.nan_to_num(g64, nan=0.0, posinf=0.0, neginf=0.0)).norm())
        return M.INF if not math.isfinite(distance) else (distance / unit if unit > 0 else 0.0 if distance == 0 else M.INF)

    return error


def typical_scale(updates: Iterable[Any]) -> float:
    """The median over parameters of the golden update's RMS per value (0 when every update is zero)."""
    import torch

    rms = sorted(float(t.double().norm()) / math.sqrt(t.numel()) for t in updates
                 if t.numel() and bool(torch.isfinite(t).all()) and float(t.double().norm()) > 0.0)
    return rms[len(rms) // 2] if rms else 0.0


def _typical_error(golden: Run, reference: Run | None) -> float:
    """The median over parameters of ``rel_l2(ΔR, ΔG)`` (0 without R); degenerate goldens left out."""
    if reference is None:
        return 0.0
    errors = sorted(err for e in golden.events
                    if (g := golden.tensor(e.match)) is not None and (r := reference.tensor(e.match)) is not None
                    and tuple(r.shape) == tuple(g.shape) and math.isfinite(err := M.rel_l2(r, g)))
    return errors[len(errors) // 2] if errors else 0.0


def training_note(original: Mapping[str, TrainingFacts], migrated: Mapping[str, TrainingFacts]) -> str | None:
    """The loss of every training step on both sides (fp32 runs), for the notes."""
    if not original or not migrated:
        return None
    fp32_o, fp32_m = original.get("fp32"), migrated.get("fp32")
    lo = fp32_o.losses if fp32_o is not None else ()
    lm = fp32_m.losses if fp32_m is not None else ()
    steps = fp32_m.steps if fp32_m is not None else len(lm)
    how = "the program's train_step" if fp32_m is not None and fp32_m.train_step else "backward() + step()"
    pairs = ", ".join(f"{a:.5g}/{b:.5g}" for a, b in zip(lm, lo))
    return f"{steps} real training steps through {how}; fp32 loss per step migrated/original: {pairs}"
