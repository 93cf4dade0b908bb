"""Arguments of a fused op only the target's msprobe dump has, checked against the original's eager ops in
the same module: msprobe pairs nothing with `NPU.npu_rms_norm` (the original ran pow, mean, add, rsqrt),
and an epsilon of 1e-6 for the original's 1e-5 moves the output by less than the fp32 bound, so no record
after it fails. The module scope comes from construct.json (level mix); the epsilon default is
torch_npu's (ascend-facts §c.3, `npu_emulation.ops.npu_rms_norm`). Likewise `npu_rotary_mul`'s cos / sin
tables against the constant tables the original's eager rotary multiplies by: a rotation keeps every norm,
so a table built with another rope theta shows in a statistics dump only as small changes far downstream.
And `npu_fusion_attention`'s bool `atten_mask` (True = masked out) against the original's additive mask."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from typing import Any

from ..comparison.fused_args import EPS_RTOL
from .msprobe_dumps import Record, Slot

RMS_NORM_DEFAULT_EPS = 1e-6
_ADDS = ("Tensor.__add__", "Tensor.__radd__", "Tensor.add", "Torch.add")


def _added_constant(records: Iterable[Record]) -> float | None:
    """The small positive constant the original's eager norm adds (its eps), if exactly one shows."""
    found = {float(s.value) for r in records if r.api in _ADDS for s in r.slots
             if s.kind == "value" and isinstance(s.value, (int, float)) and 0 < s.value < 1e-2}
    return found.pop() if len(found) == 1 else None


def _epsilon(record: Record) -> tuple[float, bool]:
    """(epsilon, whether the call gave it)."""
    values = {s.path: s.value for s in record.slots if s.kind == "value"}
    value = values.get("input_kwargs.epsilon", values.get("input_args.2"))
    return (float(value), True) if isinstance(value, (int, float)) else (RMS_NORM_DEFAULT_EPS, False)


def rms_norm_eps_diffs(only_target: Iterable[Record], only_golden: Iterable[Record]) -> list[tuple[Record, str]]:
    """(target-only `npu_rms_norm` record, its argument diff) where its epsilon is not the eps the
    original's eager ops in the same module add."""
    eager: dict[str, list[Record]] = {}
    for record in only_golden:
        if record.direction == "forward" and record.scope:
            eager.setdefault(record.scope, []).append(record)
    diffs = []
    for record in only_target:
        if record.api != "NPU.npu_rms_norm" or record.direction != "forward" or record.scope not in eager:
            continue
        original = _added_constant(eager[record.scope])
        port, given = _epsilon(record)
        if original is not None and abs(port - original) > EPS_RTOL * abs(original):
            diffs.append((record, f"epsilon: {original:g} (the original adds it before rsqrt) → {port:g}"
                          + ("" if given else " (npu_rms_norm's default)")))
    return diffs


_TABLE_RTOL = 1e-5
_ROTARY_TABLES = (("input_args.1", "input_kwargs.r1", "cos"), ("input_args.2", "input_kwargs.r2", "sin"))


def _table_stats(slot: Slot) -> tuple[float, ...] | None:
    stats = tuple(value for _, value in slot.stats)
    return tuple(float(v) for v in stats) if stats and None not in stats else None  # type: ignore[arg-type]


def _same_table(a: tuple[float, ...], b: tuple[float, ...]) -> bool:
    return all(abs(x - y) <= _TABLE_RTOL * max(abs(x), abs(y), 1e-12) for x, y in zip(a, b))


def rotary_table_diffs(only_target: Iterable[Record], only_golden: Iterable[Record]) -> list[tuple[Record, str]]:
    """(first target-only `npu_rotary_mul` record of a module, diff) where its cos / sin table is none of the
    constant tables (no grad, same size) the original's eager rotary in the same module multiplies by: the
    tables were built differently (rope theta, base, positions). Compared by their statistics (Max, Min, Mean,
    Norm), so a `[1, 1, S, D]` view of the original's `[S, D]` table is the same table."""
    tables: dict[str, list[tuple[int, tuple[float, ...]]]] = {}
    for record in only_golden:
        if record.direction == "forward" and record.scope:
            for slot in record.slots:
                if slot.kind == "tensor" and slot.requires_grad is False and (stats := _table_stats(slot)):
                    tables.setdefault(record.scope, []).append((math.prod(slot.shape), stats))
    diffs, seen = [], set()
    for record in sorted(only_target, key=lambda r: r.order):
        if record.api != "NPU.npu_rotary_mul" or record.direction != "forward" or record.scope in seen:
            continue
        slots = {s.path: s for s in record.slots if s.kind == "tensor"}
        differing = []
        for arg, kwarg, name in _ROTARY_TABLES:
            table = slots.get(arg) or slots.get(kwarg)
            stats = _table_stats(table) if table is not None else None
            candidates = [s for n, s in tables.get(record.scope, ()) if table is not None and n == math.prod(table.shape)]
            if stats is not None and candidates and not any(_same_table(stats, c) for c in candidates):
                differing.append(f"{name} (Norm {stats[3]:.6g}; the original's: "
                                 + ", ".join(sorted({f'{c[3]:.6g}' for c in candidates})) + ")")
        if differing:
            seen.add(record.scope)
            diffs.append((record, "rotary tables: the port's npu_rotary_mul reads " + " and ".join(differing)
                          + ", none of the tables the original's rotary multiplies by in this module: its cos / sin "
                          "buffers were built differently (rope theta, base or positions)"))
    return diffs


def _additive_mask(records: Iterable[Record]) -> Slot | None:
    """The original's additive attention mask: a no-grad tensor argument of an add, 0 where attended and one
    large negative value where masked (Max 0, Min < 0)."""
    for record in records:
        if record.api in _ADDS and record.direction == "forward":
            for slot in record.slots:
                top, low = slot.stat("Max"), slot.stat("Min")
                if slot.kind == "tensor" and slot.requires_grad is False and top == 0 and low is not None and low < 0:
                    return slot
    return None


def _keep_mask_built(records: Iterable[Record]) -> bool:
    """Whether the port's module builds a mask by `== 0` on an additive mask: True where the original attends."""
    for record in records:
        if record.api in ("Tensor.__eq__", "Torch.eq", "Tensor.eq") and record.direction == "forward":
            mask = next((s for s in record.slots if s.path == "input_args.0" and s.kind == "tensor"), None)
            other = next((s.value for s in record.slots if s.path == "input_args.1" and s.kind == "value"), None)
            if mask is not None and mask.stat("Max") == 0 and (mask.stat("Min") or 0) < 0 and other == 0:
                return True
    return False


def attention_mask_diffs(only_target: Iterable[Record], only_golden: Iterable[Record],
                         load: Callable[[str], Any]) -> list[tuple[Record, str]]:
    """(target-only `npu_fusion_attention` record, diff) where its bool `atten_mask` (True = masked out) does not
    mask what the original's additive mask in the same module masks: the share of masked positions (tensor
    task), or, in a statistics dump, a mask built by `== 0` on the additive mask (a keep-mask)."""
    golden: dict[str, list[Record]] = {}
    for record in only_golden:
        golden.setdefault(record.scope, []).append(record)
    target: dict[str, list[Record]] = {}
    for record in only_target:
        target.setdefault(record.scope, []).append(record)
    diffs, seen = [], set()
    for record in sorted(only_target, key=lambda r: r.order):
        if record.api != "NPU.npu_fusion_attention" or record.direction != "forward" or record.scope in seen:
            continue
        mask = next((s for s in record.slots if s.path == "input_kwargs.atten_mask" and s.kind == "tensor"), None)
        additive = _additive_mask(golden.get(record.scope, ()))
        if mask is None or additive is None or mask.dtype != "torch.bool":
            continue
        original = (additive.stat("Mean") or 0.0) / (additive.stat("Min") or -1.0)  # share of masked positions
        text = ""
        if mask.data_file:
            port = float(load(mask.data_file).float().mean())
            if abs(port - original) > 1e-6:
                inverted = abs(port - (1 - original)) <= 1e-6
                text = (f"atten_mask: the port masks out {port:.1%} of positions, the original's additive mask "
                        f"{original:.1%}" + (": inverted, a keep-mask (npu_fusion_attention masks where True)"
                                             if inverted else ""))
        elif _keep_mask_built(target.get(record.scope, ())):
            text = ("atten_mask: built by `== 0` on the original's additive mask, True where the original attends: "
                    "inverted, a keep-mask (npu_fusion_attention masks where True)")
        if text:
            seen.add(record.scope)
            diffs.append((record, text))
    return diffs
