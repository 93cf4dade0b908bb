"""Arguments of a fused op only the target's msprobe dump has, checked against the original's eager ops in
the same module: msprobe pairs nothing with `NPU.npu_rms_norm` (the original ran pow, mean, add, rsqrt),
and an epsilon of 1e-6 for the original's 1e-5 moves the output by less than the fp32 bound, so no record
after it fails. The module scope comes from construct.json (level mix); the epsilon default is
torch_npu's (ascend-facts §c.3, `npu_emulation.ops.npu_rms_norm`)."""

from __future__ import annotations

from collections.abc import Iterable

from ..comparison.fused_args import EPS_RTOL
from .msprobe_dumps import Record

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
