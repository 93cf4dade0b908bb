"""Model FLOPs per training step, counted with ``torch.utils.flop_counter.FlopCounterMode``.

The count covers forward and backward (what runs inside the counted function); the optimizer
step is not part of the benchmarked step. FlopCounterMode counts matmul/conv/attention FLOPs
(2 per multiply-add), not elementwise work, so a dense transformer lands near the usual
6 · params · tokens (+ attention), and a stack of ``nn.Linear`` exactly at
6 · batch · Σ in·out (bias adds not counted).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


def count(fn: Callable[[], Any]) -> tuple[int, dict[str, int], Any]:
    """Run ``fn()`` once under the FLOP counter: (total FLOPs, per-op FLOPs, fn's return)."""
    from torch.utils.flop_counter import FlopCounterMode

    counter = FlopCounterMode(display=False)
    with counter:
        result = fn()
    counts = counter.get_flop_counts()
    top = counts.get("Global", {})  # the module-level totals (every op once)
    per_op: dict[str, int] = {str(op).replace("aten.", ""): int(n) for op, n in top.items()}
    return int(counter.get_total_flops()), per_op, result
