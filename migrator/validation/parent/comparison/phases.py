"""Which phase of the training step differs (parent side, no torch).

Both sides' fp32 k-step runs noted their step's phases in order (:mod:`..child.phase_probe`):
``backward`` (``accumulate`` when more than one runs before an optimizer step), ``unscale``,
``clip``, ``step``, ``zero_grad``, each with the per-parameter norms it left (grads; updates for
``step``). The phases are aligned step by step; the cause is the first phase that runs on one
side only or out of order, else the first whose state before agrees and whose state after does
not, named with its arguments and, where every parameter moved by one factor, that factor.
"""

from __future__ import annotations

import difflib
import math
from collections.abc import Sequence

from ...facts import PhaseEvent, TrainingFacts

AGREE = 1e-3  # per-parameter norm, relative: fp32 reorderings of a correct port stay near 1e-6
CALLS = {"backward": "loss.backward()", "accumulate": "loss.backward() (gradient accumulation)",
         "unscale": "scaler.unscale_", "clip": "clip_grad_norm_", "step": "optimizer.step",
         "zero_grad": "optimizer.zero_grad"}


def _names(events: Sequence[PhaseEvent]) -> list[str]:
    """``backward`` becomes ``accumulate`` where several backwards feed one optimizer step."""
    out = [e.phase for e in events]
    run: list[int] = []
    for i, name in enumerate(out + ["step"]):
        if name == "backward":
            run.append(i)
        elif name == "step":
            if len(run) > 1:
                for k in run:
                    out[k] = "accumulate"
            run = []
    return out


def _agree(a: Sequence[float], b: Sequence[float]) -> bool:
    return len(a) == len(b) and all(abs(x - y) <= AGREE * max(abs(y), 1e-12) or (x == y) for x, y in zip(a, b))


def _factor(a: Sequence[float], b: Sequence[float]) -> float | None:
    ratios = [x / y for x, y in zip(a, b) if y > 0 and x > 0]
    if len(ratios) < max(1, len(a) // 2):
        return None
    lo, hi = min(ratios), max(ratios)
    if hi / lo - 1 > 0.01 or abs(lo - 1) < 0.01:
        return None
    return math.sqrt(lo * hi)


def _args(e: PhaseEvent) -> str:
    args = {k: v for k, v in e.args.items() if k != "fn"}
    return ", ".join(f"{k}={v}" for k, v in args.items())


def _sequence(names: Sequence[str]) -> str:
    return ", ".join(names)


def cause(original: TrainingFacts | None, migrated: TrainingFacts | None) -> str | None:
    """``training step phase clip (clip_grad_norm_) in step 0: ...`` or None (no phases noted)."""
    ev_o = list(original.phases) if original is not None else []
    ev_m = list(migrated.phases) if migrated is not None else []
    if not ev_o or not ev_m:
        return None
    names_o, names_m = _names(ev_o), _names(ev_m)
    for step in sorted({e.step for e in ev_o} | {e.step for e in ev_m}):
        io = [i for i, e in enumerate(ev_o) if e.step == step]
        im = [i for i, e in enumerate(ev_m) if e.step == step]
        seq_o, seq_m = [names_o[i] for i in io], [names_m[i] for i in im]
        order = f"{_sequence(seq_m)} (migrated) vs {_sequence(seq_o)} (original)"
        if seq_o != seq_m:
            return f"training step phases differ in step {step}: {_order_cause(seq_o, seq_m)}; order {order}"
        before_agree = True
        for a, b in zip(io, im):
            eo, em = ev_o[a], ev_m[b]
            agree = _agree(em.state, eo.state)
            if before_agree and not agree:
                name = names_m[b]
                what = "updates" if name == "step" else "grads"
                text = (f"training step phase {name} ({CALLS.get(name, name)}) in step {step}: {what} agree before "
                        f"it and differ after")
                factor = _factor(em.state, eo.state)
                if factor is not None:
                    text += f" (every parameter's {what} x{factor:.3g})"
                am, ao = _args(em), _args(eo)
                if am != ao:
                    text += f"; arguments {am or 'none'} (migrated) vs {ao or 'none'} (original)"
                return text
            before_agree = agree
    return None


def _order_cause(seq_o: list[str], seq_m: list[str]) -> str:
    matcher = difflib.SequenceMatcher(None, seq_o, seq_m, autojunk=False)
    for tag, a0, a1, b0, b1 in matcher.get_opcodes():
        if tag == "equal":
            continue
        gone, new = seq_o[a0:a1], seq_m[b0:b1]
        if sorted(seq_o) == sorted(seq_m):
            first = next(k for k, (x, y) in enumerate(zip(seq_o, seq_m)) if x != y)
            return (f"{seq_m[first]} ({CALLS.get(seq_m[first], seq_m[first])}) runs where the original runs "
                    f"{seq_o[first]} ({CALLS.get(seq_o[first], seq_o[first])})")
        if gone and not new:
            return ", ".join(f"{g} ({CALLS.get(g, g)})" for g in gone) + " missing on the migrated side"
        if new and not gone:
            return ", ".join(f"{g} ({CALLS.get(g, g)})" for g in new) + " on the migrated side only"
        return f"{', '.join(new)} (migrated) where the original runs {', '.join(gone)}"
    return "the same phases"
