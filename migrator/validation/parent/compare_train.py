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
  2e-4)`` with the parameter-grad thresholds (pass ≤ 3, warn ≤ 5). The median: after k Adam steps one
  parameter's bf16 error is one noisy sample (sign flips of grads near 0 move an update by up to lr), and
  R's may be small by chance where T's is not; measured on a correct SwiGLU → ``npu_swiglu`` hand port
  (tests/validation/llama_family.py): ΔR 4.9e-3 vs ΔT16 4.4e-2 on one matrix, with R 2-7 % on the others.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .. import metrics as M
from .compare import FAIL, Check, Comparison, Run, TensorVerdict, Thresholds, _grade

TRAIN_FP32_PASS, TRAIN_FP32_WARN = 1e-4, 1e-3
_DEFAULT = Thresholds()
ORDER = 5_000_000  # after the step-0 tensors and the isolated optimizer


def compare_training(G: Run | None, R: Run | None, T32: Run | None, T16: Run | None, *, th: Thresholds = _DEFAULT,
                     cross_device: bool = False) -> Comparison:
    out = Comparison()
    factor = th.cross_device_factor if cross_device else 1.0
    f32_pass, f32_warn = TRAIN_FP32_PASS * factor, TRAIN_FP32_WARN * factor
    under_test = T32 or T16
    if under_test is None or G is None:
        return out
    typical = _typical_error(G, R)
    for order, event in enumerate(under_test.events):
        match = event["match"]
        g = G.tensor(match)
        checks: list[Check] = []
        if g is None:
            out.unmatched.append(f"train/{event['name']} (not in the original's training run)")
            checks.append(Check("unmatched", 1.0, 0.0, FAIL))
        else:
            t32 = T32.tensor(match) if T32 is not None else None
            if t32 is not None and tuple(t32.shape) == tuple(g.shape):
                e = M.rel_l2(t32, g)
                checks.append(Check("train_rel_l2_fp32", e, f32_warn, _grade(e, f32_pass, f32_warn)))
            t16 = T16.tensor(match) if T16 is not None else None
            r = R.tensor(match) if R is not None else None
            if t16 is not None and r is not None and tuple(t16.shape) == tuple(r.shape) == tuple(g.shape):
                ratio = M.ratio(M.rel_l2(t16, g), max(M.rel_l2(r, g), typical))
                checks.append(Check("train_ratio", ratio, th.grad_warn, _grade(ratio, th.grad_pass, th.grad_warn)))
        if not checks:
            continue
        status = max((c.status for c in checks), key=lambda s: {"pass": 0, "warn": 1, "fail": 2}[s])
        out.verdicts.append(TensorVerdict(
            name=event["name"], match=match, category="training", scope="training",
            scope_cls=event.get("cls"), order=ORDER + order, status=status, checks=tuple(checks), label="train/"))
    return out


def _typical_error(G: Run, R: Run | None) -> float:
    """The median over parameters of ``rel_l2(ΔR, ΔG)`` (0 without R)."""
    if R is None:
        return 0.0
    errors = sorted(M.rel_l2(r, g) for e in G.events
                    if (g := G.tensor(e["match"])) is not None and (r := R.tensor(e["match"])) is not None
                    and tuple(r.shape) == tuple(g.shape))
    return errors[len(errors) // 2] if errors else 0.0


def training_note(original: Mapping[str, Any] | None, migrated: Mapping[str, Any] | None) -> str | None:
    """The loss of every training step on both sides (fp32 runs), for the notes."""
    if not original or not migrated:
        return None
    lo, lm = original.get("fp32", {}).get("losses", []), migrated.get("fp32", {}).get("losses", [])
    steps = migrated.get("fp32", {}).get("steps", len(lm))
    how = "the program's train_step" if migrated.get("fp32", {}).get("train_step") else "backward() + step()"
    pairs = ", ".join(f"{a:.5g}/{b:.5g}" for a, b in zip(lm, lo))
    return f"{steps} real training steps through {how}; fp32 loss per step migrated/original: {pairs}"
