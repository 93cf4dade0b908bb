"""`migrate validate --msprobe-target DIR --msprobe-golden DIR`: our verdicts over two msprobe dumps.

Records are paired per step and rank by aligning the two runs' sequences of (API, direction, tensor shapes)
in execution order, not by msprobe's call counter (`Functional.gelu.0.forward`): a port or a refactor that
removes or adds one op (a multiply folded into a scale) shifts every later counter of that API, and pairing
by key then compared every later call with the wrong one (issue 37 item 5). A call whose shapes changed (a
causal conv written as a left pad and an unpadded conv) is no counterpart of the original's either: both
are one-sided, and the records after them, where the two runs line up again, say whether it changed
anything. Only past the last record that lines up are calls paired by (API, direction) alone, so a shape
change that never realigns is compared and fails on its shape. A record with no counterpart is listed
(added or removed by the port) and makes the result at most a warning. Each tensor slot gets one gate
(numerics.md §3.3 thresholds, `thresholds.Thresholds`):

* tensor task: `rel_l2(target, golden)` from the `.pt` files: fp32/fp64 ≤ 1e-5 pass, ≤ 1e-4 warn (×10 with
  `cross_device`); bf16/fp16 against the absolute bounds 0.02 (forward) / 0.1 (backward, gradients), as
  `migrate validate` does without a bf16 reference run; integer tensors must be equal;
* statistics task: the relative difference of the recorded L2 norms, with the same thresholds — a lower
  bound of rel_l2 (|‖t‖ − ‖g‖| ≤ ‖t − g‖), so a failure is certain and a pass is a weaker claim (said in
  the notes); Max / Min are report columns;
* the optimizer's in-place update of an fp32 parameter (tensor task): the new value's error against the
  size of the update, as the k-step training check judges updates (`msprobe_updates`);
* a shape or dtype change fails; a non-tensor argument that differs (`approximate: 'none'` → `'tanh'`) is
  an argument diff and fails the record.

Localisation: the first failing record in the target's execution order, with its argument diffs, the
user's line from `stack.json`, its module (construct.json: `layers.0.mixer.dt_proj (Linear)`; at level L1,
whose construct.json is empty, rebuilt from the stacks and the source: `msprobe_stack_scopes`), the
parameters of that module its tensor arguments are (same shape and statistics: `input_args.1` =
`layers.0.mixer.dt_proj.weight`) and the port-only records just before it (a fused op whose output
the first failing record reads). A fused op only the target has is checked against the original's eager
ops in its module (`msprobe_fused`: `npu_rms_norm`'s epsilon, `npu_rotary_mul`'s cos / sin tables, `npu_fusion_attention`'s atten_mask), since
its effect can stay under the bounds, and a weight decay only one side's optimizer applies fails by name
(`msprobe_updates`); the original's collectives right before the first divergence that the port no longer
calls are listed (`lost_collectives`).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from ...verdict import Verdict, worst
from ..comparison.thresholds import Thresholds
from .msprobe_dumps import RankDump, Record, Slot, read_dump
from .msprobe_record_verdicts import RecordVerdict, SlotVerdict
from .msprobe_source_diffs import collective_diffs, optimizer_settings_diff
from .msprobe_state import (
    PARAMETER_ARGS,
    built_differently,
    built_differently_in_calls,
    unread_parameters,
    unrecorded_inputs,
    unrecorded_state,
)
from .msprobe_updates import (
    OPTIMIZER_SCOPE,
    UpdateJudge,
    decay_diffs,
    hyper_parameter,
    named_slots,
    parameter_names,
    unnamed_updated,
)

_FLOAT32 = ("torch.float32", "torch.float64")
_LOW = ("torch.bfloat16", "torch.float16")
# said of a later step's parameter whose update by the step before differs; `_about_an_update` reads it back
_AFTER_AN_UPDATE = ("the value the step before's optimizer update left, that step's records matched: the optimizer's "
                    "update of it differs")


@dataclass(frozen=True)
class MsprobeComparison:
    status: Verdict
    task: str
    records: tuple[RecordVerdict, ...]
    first_divergence: RecordVerdict | None
    unmatched: tuple[str, ...] = ()
    notes: tuple[str, ...] = field(default_factory=tuple)
    one_sided_before: tuple[str, ...] = ()  # target-only records right before the first divergence
    lost_collectives: tuple[str, ...] = ()  # the original's collectives right before its counterpart, not in the port
    built_differently: tuple[str, ...] = ()  # parameters that differ as built (module records of the first step)
    unrecorded: str = ""  # the module where the difference arises in what msprobe does not record (buffers)
    in_source: tuple[str, ...] = ()  # what the two sources build or call differently (msprobe_source_diffs)

    @property
    def exit_code(self) -> int:
        return 1 if self.status == Verdict.FAIL else 0


def _grade(value: float, pass_at: float, warn_at: float) -> Verdict:
    if math.isnan(value):
        return Verdict.FAIL
    return Verdict.PASS if value <= pass_at else Verdict.WARN if value <= warn_at else Verdict.FAIL


def _bounds(dtype: str, direction: str, th: Thresholds, cross_device: bool) -> tuple[float, float]:
    if dtype in _LOW:
        bound = th.activations.absolute if direction == "forward" else th.gradients.absolute
        return bound, bound
    bounds = th.fp32.for_devices(cross_device)
    return bounds.pass_at, bounds.warn_at


def _load(path: str) -> Any:
    import torch

    return torch.load(path, map_location="cpu", weights_only=True)


def _tensor_verdict(t: Slot, g: Slot, direction: str, th: Thresholds, cross_device: bool) -> SlotVerdict:
    if t.shape != g.shape:
        return SlotVerdict(t.path, Verdict.FAIL, "shape", 1.0, 0.0, f"{list(g.shape)} → {list(t.shape)}")
    if t.dtype != g.dtype:
        return SlotVerdict(t.path, Verdict.FAIL, "dtype", 1.0, 0.0, f"{g.dtype} → {t.dtype}")
    pass_at, warn_at = _bounds(t.dtype, direction, th, cross_device)
    if t.data_file and g.data_file:
        from ... import metrics as M

        target, golden = _load(t.data_file), _load(g.data_file)
        if not golden.is_floating_point():
            differs = float(not bool((target == golden).all()))
            return SlotVerdict(t.path, Verdict.FAIL if differs else Verdict.PASS, "equal", differs, 0.0)
        value = M.rel_l2(target, golden)
        detail = f"cosine {M.cosine(target, golden):.6f}, max_abs {M.max_abs(target, golden):.3g}"
        return SlotVerdict(t.path, _grade(value, pass_at, warn_at), "rel_l2", value, pass_at, detail)
    tn, gn = t.stat("Norm"), g.stat("Norm")
    if tn is None or gn is None:
        return SlotVerdict(t.path, Verdict.PASS, "no_statistics", 0.0, 0.0, "no Norm recorded")
    value = abs(tn - gn) / max(abs(gn), 1e-30)
    detail = f"max {g.stat('Max')} → {t.stat('Max')}, min {g.stat('Min')} → {t.stat('Min')}"
    return SlotVerdict(t.path, _grade(value, pass_at, warn_at), "norm_rel_diff", value, pass_at, detail)


def _record_verdict(label: str, t: Record, g: Record, th: Thresholds, cross_device: bool,
                    updates: UpdateJudge | None = None) -> RecordVerdict:
    golden = {s.path: s for s in g.slots}
    verdicts, diffs = [], []
    update = updates.verdict(t, g) if updates is not None else None
    for slot in t.slots:
        other = golden.get(slot.path)
        if other is None:
            verdicts.append(SlotVerdict(slot.path, Verdict.FAIL, "unmatched", 1.0, 0.0, "not in the golden record"))
        elif slot.kind == "value" or other.kind == "value":
            if slot.value != other.value or slot.kind != other.kind:
                word = hyper_parameter(t, slot.path)
                diffs.append(f"{slot.path.removeprefix('input_kwargs.')}: {other.value!r} → {slot.value!r}"
                             + (f" (the optimizer's {word})" if word else ""))
                verdicts.append(SlotVerdict(slot.path, Verdict.FAIL, "argument", 1.0, 0.0, diffs[-1]))
        elif slot.path == "output.0" and update is not None:  # an optimizer's parameter update (msprobe_updates)
            verdicts.append(SlotVerdict(slot.path, *update))
        elif updates is not None and updates.after_update(t.key, slot.path):  # one update after the step before
            step = updates.parameter_verdict(t.key, slot)
            verdict = SlotVerdict(slot.path, *step) if step else _tensor_verdict(slot, other, t.direction, th, cross_device)
            verdicts.append(verdict if verdict.status == Verdict.PASS else replace(
                verdict, detail=f"{verdict.detail}; {_AFTER_AN_UPDATE}"))
        else:
            verdicts.append(_tensor_verdict(slot, other, t.direction, th, cross_device))
    missing = [p for p in golden if p not in {s.path for s in t.slots}]
    for path in missing:
        verdicts.append(SlotVerdict(path, Verdict.FAIL, "unmatched", 1.0, 0.0, "only in the golden record"))
    status = worst(v.status for v in verdicts)
    return RecordVerdict(label, t.key, t.api, t.direction, status, tuple(verdicts), tuple(diffs), t.user_line,
                         _module_text(t.scope))


def _module_text(key: str) -> str:
    """`Module.layers.0.mixer.dt_proj.Linear.forward.0` -> `layers.0.mixer.dt_proj (Linear)`; msprobe's scopes
    of `optimizer.step()` and `clip_grad_norm_` as they are."""
    parts = key.removeprefix("Module.").split(".")
    if key in (OPTIMIZER_SCOPE, "clip_grad"):
        return key
    if not key.startswith("Module.") or len(parts) < 3:
        return ""
    return f"{'.'.join(parts[:-3])} ({parts[-3]})" if len(parts) > 3 else parts[-3]


def _fingerprint(slot: Slot) -> tuple | None:
    stats = tuple(value for _, value in slot.stats)
    return (slot.shape, stats) if stats and None not in stats else None


def _named_parameters(verdict: RecordVerdict, record: Record, by_key: dict[str, Record],
                      names: dict[tuple, str]) -> RecordVerdict:
    """The verdict with the tensor arguments that are its module's parameters named (same shape and
    statistics as a `parameters.<name>` slot of the enclosing module's record; in the optimizer's scope, any
    module's parameter, followed through the step's updates; without a module record, a functional's
    weight / bias argument that requires grad, by the function's signature)."""
    if record.scope == OPTIMIZER_SCOPE:
        named_in_step = named_slots(record, names)
        return replace(verdict, parameters=named_in_step) if named_in_step else verdict
    module = by_key.get(record.scope)
    prefix = verdict.scope.split(" (")[0]
    params = {fp: slot.path.removeprefix("parameters.") for slot in module.slots
              if slot.path.startswith("parameters.") and (fp := _fingerprint(slot)) is not None} if module else {}
    named = tuple((slot.path, f"{prefix}.{params[fp]}") for slot in record.slots
                  if slot.kind == "tensor" and not slot.path.startswith("parameters.")
                  and (fp := _fingerprint(slot)) in params)
    if not named and module is None:
        by_position = PARAMETER_ARGS.get(record.api, {})
        named = tuple((slot.path, f"{prefix}.{name}" if prefix else f"the {name} of {record.api}")
                      for slot in record.slots if slot.kind == "tensor" and slot.requires_grad
                      and slot.path.startswith("input_args.")
                      and (name := by_position.get(int(slot.path.split(".")[1]), "")))
    return replace(verdict, parameters=named) if named else verdict


def _pairs(target: tuple[RankDump, ...], golden: tuple[RankDump, ...]) -> tuple[list[tuple[RankDump, RankDump]], list[str]]:
    by_label = {(d.step, d.rank): d for d in golden}
    steps_t, steps_g = {d.step for d in target}, {d.step for d in golden}
    if steps_t != steps_g and len(steps_t) == 1 and len(steps_g) == 1:  # one step each: pair them, whatever their number
        by_label = {(next(iter(steps_t)), d.rank): d for d in golden}
    pairs, unmatched = [], []
    for dump in target:
        other = by_label.pop((dump.step, dump.rank), None)
        if other is None:
            unmatched.append(f"{dump.label}: no golden dump")
        else:
            pairs.append((dump, other))
    unmatched += [f"{d.label}: no target dump" for d in by_label.values()]
    return pairs, unmatched


def _shapes(record: Record) -> tuple[tuple[int, ...], ...]:
    return tuple(slot.shape for slot in record.slots if slot.kind == "tensor")


def _matched(t_seq: list[Record], g_seq: list[Record], key: Callable[[Record], tuple]) -> list[tuple[int, int]]:
    import difflib

    matcher = difflib.SequenceMatcher(None, [key(r) for r in t_seq], [key(r) for r in g_seq], autojunk=False)
    return [(block.a + k, block.b + k) for block in matcher.get_matching_blocks() for k in range(block.size)]


def align(target: tuple[Record, ...], golden: tuple[Record, ...]
          ) -> tuple[list[tuple[Record, Record]], list[Record], list[Record]]:
    """(paired records, target-only, golden-only): the longest matching blocks of (API, direction, tensor
    shapes) in execution order, so an added, removed or reshaped call does not shift the pairing of the
    calls after it; past the last matched pair, by (API, direction) alone (see the module docstring)."""
    t_seq = sorted(target, key=lambda r: r.order)
    g_seq = sorted(golden, key=lambda r: r.order)
    pairs = _matched(t_seq, g_seq, lambda r: (r.api, r.direction, _shapes(r)))
    last_t, last_g = pairs[-1] if pairs else (-1, -1)
    tail = _matched(t_seq[last_t + 1:], g_seq[last_g + 1:], lambda r: (r.api, r.direction))
    pairs += [(last_t + 1 + a, last_g + 1 + b) for a, b in tail]
    seen_t, seen_g = {a for a, _ in pairs}, {b for _, b in pairs}
    only_t = [r for i, r in enumerate(t_seq) if i not in seen_t]
    only_g = [r for i, r in enumerate(g_seq) if i not in seen_g]
    return [(t_seq[a], g_seq[b]) for a, b in pairs], only_t, only_g


def _with_one_sided_checks(label: str, verdicts: list[RecordVerdict], pairs: list[tuple[Record, Record]],
                           only_target: list[Record], only_golden: list[Record], names: dict[tuple, str]
                           ) -> list[RecordVerdict]:
    """`verdicts` with a failing verdict for each target-only fused op whose arguments are not the
    original's (`msprobe_fused`: epsilon, rotary tables) and each parameter only one side's optimizer decays (`msprobe_updates`),
    placed in the target's execution order (before the record it is reported at)."""
    from .msprobe_fused import attention_mask_diffs, rms_norm_eps_diffs, rotary_table_diffs

    placed: list[tuple[float, RecordVerdict]] = [(t.order, v) for (t, _), v in zip(pairs, verdicts)]
    checks = [("input_kwargs.epsilon", r, d) for r, d in rms_norm_eps_diffs(only_target, only_golden)]
    checks += [("input_args.1", r, d) for r, d in rotary_table_diffs(only_target, only_golden)]
    checks += [("input_kwargs.atten_mask", r, d) for r, d in attention_mask_diffs(only_target, only_golden, _load)]
    checks += [("input_args.1", r, d) for r, d in decay_diffs([t for t, _ in pairs] + only_target,
                                                              [g for _, g in pairs] + only_golden, names)]
    for path, record, diff in checks:
        slot = SlotVerdict(path, Verdict.FAIL, "argument", 1.0, 0.0, diff)
        verdict = RecordVerdict(label, record.key, record.api, record.direction, Verdict.FAIL, (slot,), (diff,),
                                record.user_line, _module_text(record.scope),
                                named_slots(record, names) if record.scope == OPTIMIZER_SCOPE else ())
        placed.append((record.order - 0.5, verdict))
    return [v for _, v in sorted(placed, key=lambda item: item[0])]


def _one_sided_before(first: RecordVerdict, dump: RankDump, only_target: list[Record]) -> tuple[str, ...]:
    """Target-only records of the first divergence's direction between it and the paired record before it."""
    lonely = {r.key for r in only_target}
    order = sorted(dump.records, key=lambda r: r.order)
    at = next(i for i, r in enumerate(order) if r.key == first.key)
    before: list[str] = []
    for record in reversed(order[:at]):
        if record.key not in lonely:
            break
        if record.direction == first.direction:
            before.insert(0, record.key)
    return tuple(before)


def _lost_collectives(first: RecordVerdict, paired: list[tuple[Record, Record]], dump: RankDump,
                      only_golden: list[Record], most: int = 3) -> tuple[str, ...]:
    """The golden-only `Distributed.*` records among the golden-only records right before the golden counterpart
    of the first divergence (any direction: msprobe records a backward's all_reduce as `.forward`), nearest
    last, with the module it was called in: a collective the port no longer calls."""
    partner = next((g for t, g in paired if t.key == first.key), None)
    if partner is None:
        return ()
    lonely = {r.key for r in only_golden}
    order = sorted(dump.records, key=lambda r: r.order)
    at = next(i for i, r in enumerate(order) if r.key == partner.key)
    before: list[str] = []
    for record in reversed(order[:at]):
        if record.key not in lonely or len(before) == most:
            break
        if record.api.startswith("Distributed."):
            before.insert(0, record.key + _called_in(record.scope))
    return tuple(before)


def _called_in(scope: str) -> str:
    """` (in the backward of layers.0.up (ColumnParallelLinear))` for a record inside a module's forward or
    backward: at level L1 the record the port differs at is downstream, in another module."""
    direction = scope.split(".")[-2] if scope.startswith("Module.") and scope.count(".") >= 3 else ""
    return f" (in the {direction} of {_module_text(scope)})" if direction in ("forward", "backward") else ""


def _not_covered(dumps: tuple[RankDump, ...]) -> str | None:
    """What a level-L0 dump cannot show (it records modules only), said as a note that keeps the verdict from
    a plain pass; None at the other levels."""
    if not dumps or any(d.level != "L0" for d in dumps):
        return None
    seen = ("the optimizer through the parameters of steps after the first (each one update later)"
            if len({d.step for d in dumps}) > 1 else
            "not the optimizer either: with one step its update never reaches a module record; dump steps [0, 1] "
            "so step 1's module records hold the parameters step 0 updated")
    return ("level L0 records modules only: ops between modules and buffers the step updates outside them (an "
            f"EMA of the weights) are not compared; {seen}; dump level mix for the rest")


def _has_modules(dump: RankDump) -> bool:
    return any(r.key.startswith("Module.") for r in dump.records)


def _names(t_dump: RankDump, g_dump: RankDump) -> dict[tuple, str]:
    """`parameter_names` of both sides; at level L1, a parameter the optimizer updates that no recorded op
    reads is named by the source's parameters that no recorded line reads (`unread_parameters`)."""
    names = parameter_names(g_dump.records) | parameter_names(t_dump.records)
    if not _has_modules(t_dump) and (unnamed := unnamed_updated(t_dump.records, names)):
        candidates = unread_parameters(t_dump.records)
        names |= {fp: " or ".join(candidates) for fp in unnamed} if candidates else {}
    return names


def _unrecorded(failing: RecordVerdict, verdicts: list[RecordVerdict], t_dump: RankDump, g_dump: RankDump,
                before: tuple[str, ...], tolerance: float) -> str:
    """`unrecorded_state` (module records); without them (level L1), `unrecorded_inputs` of the first
    divergence and the port-only records right before it."""
    found = unrecorded_state(failing, verdicts, t_dump)
    worst_slot = failing.worst.slot if failing.worst is not None else ""
    if found or _has_modules(t_dump) or failing.argument_diffs or worst_slot in dict(failing.parameters):
        return found  # at L1 too, an argument or a parameter that differs is the cause already
    suspects = [r for r in t_dump.records if r.key == failing.key or r.key in before]
    return unrecorded_inputs(suspects, t_dump, g_dump, tolerance)


def compare_dumps(target_dir: str, golden_dir: str, *, cross_device: bool = False,
                  th: Thresholds | None = None) -> MsprobeComparison:
    """Compare two msprobe dump folders (see the module docstring); raises MsprobeDumpError on bad input."""
    th = th or Thresholds()
    target, golden = read_dump(target_dir), read_dump(golden_dir)
    pairs, unmatched = _pairs(target, golden)
    records: list[RecordVerdict] = []
    notes: list[str] = []
    tasks = {d.task for d in target + golden}
    before: tuple[str, ...] = ()
    lost: tuple[str, ...] = ()
    unrecorded = ""
    by_step = {(d.step, d.rank): d for d in golden}
    first_step = min((d.step for d, _ in pairs if d.step is not None), default=None)
    first_step_calls: list[tuple[Record, Record]] = []
    for t_dump, g_dump in pairs:
        paired, only_target, only_golden = align(t_dump.records, g_dump.records)
        first_step_calls += paired if t_dump.step == first_step else []
        before_step = by_step.get((g_dump.step - 1, g_dump.rank)) if g_dump.step else None
        by_key = {r.key: r for r in t_dump.records}
        names = _names(t_dump, g_dump)
        updates = UpdateJudge(g_dump.records, th, cross_device, _load, before_step.records if before_step else ())
        verdicts = [_record_verdict(t_dump.label, t, g, th, cross_device, updates) for t, g in paired]
        verdicts = [_named_parameters(v, t, by_key, names) if v.status == Verdict.FAIL else v
                    for v, (t, _) in zip(verdicts, paired)]
        verdicts = _with_one_sided_checks(t_dump.label, verdicts, paired, only_target, only_golden, names)
        if not any(r.status == Verdict.FAIL for r in records):
            failing = next((v for v in verdicts if v.status == Verdict.FAIL), None)
            before = _one_sided_before(failing, t_dump, only_target) if failing else ()
            lost = _lost_collectives(failing, paired, g_dump, only_golden) if failing else ()
            unrecorded = _unrecorded(failing, verdicts, t_dump, g_dump, before,
                                     th.fp32.for_devices(cross_device).warn_at) if failing else ""
        records += verdicts
        unmatched += [f"{t_dump.label}: {r.key} only in the target" for r in only_target]
        unmatched += [f"{t_dump.label}: {r.key} only in the golden" for r in only_golden]
    if "statistics" in tasks:
        notes.append("statistics dumps: tensors judged by their recorded L2 norms (a lower bound of rel_l2); "
                     "dump with task 'tensor' for full tensor metrics")
    if not pairs:
        notes.append("no step/rank of the target matches one of the golden")
    status = worst(r.status for r in records) if pairs else Verdict.FAIL
    if unmatched and status == Verdict.PASS:
        status = Verdict.WARN
    if (blind := _not_covered(target + golden)) is not None:
        notes.append(blind)
        status = Verdict.WARN if status == Verdict.PASS else status
    first = next((r for r in records if r.status == Verdict.FAIL), None)
    tolerance = th.fp32.for_devices(cross_device).warn_at
    built = () if first is None else built_differently(pairs, tolerance, _load) if any(map(_has_modules, target)) \
        else built_differently_in_calls(first_step_calls, tolerance, _load)
    return MsprobeComparison(status, "/".join(sorted(tasks)), tuple(records), first, tuple(unmatched), tuple(notes),
                             before, lost, built, unrecorded, _in_source(first, target, golden))


def _in_source(first: RecordVerdict | None, target: tuple[RankDump, ...], golden: tuple[RankDump, ...]
               ) -> tuple[str, ...]:
    """`msprobe_source_diffs` for the first divergence: the optimizer's settings where its update differs, the
    collectives of a module whose record differs."""
    if first is None:
        return ()
    ours, theirs = [r for d in target for r in d.records], [r for d in golden for r in d.records]
    found = [optimizer_settings_diff(ours, theirs) if _about_an_update(first) else "",
             collective_diffs(ours, theirs, first.key)]
    return tuple(text for text in found if text)


def _about_an_update(first: RecordVerdict) -> bool:
    """Whether the first divergence is the optimizer's: a record of its step, or a parameter whose update by
    the step before differs (a later step's module record)."""
    return first.scope == OPTIMIZER_SCOPE or any(_AFTER_AN_UPDATE in s.detail for s in first.slots)
