"""The performance lint's census half (standard library only): what the traced steps show that the
source does not. Runs on the child's rows in first-call order, after two or more steps.

* dynamic shapes (`dynamic-shape`): an ATen op whose sizes change between steps compiles its operators
  again on Ascend for each new shape. Ops that change together are one finding, at the op the sizes
  start from: the first whose output carries new sizes (a batch built with this step's length, a
  `nonzero` whose size depends on the values), or the first whose inputs vary where no traced op made them;
* AICPU dtypes (`aicpu-dtype`) and ops (`aicpu-op`) from the advisor's AICPU rules for the chosen CANN
  version (`aicpu_rules.py`).

Findings sit at the user's line (the census' user frame). Backward ops run from `loss.backward()`:
they join a shape change but never start one, and their dtypes mirror the forward's, so they are not
judged again (else every forward finding would have a twin at the backward line).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from . import aicpu_rules
from .model import Frame, PerfSite

HOT_PHASES = ("forward", "backward", "optimizer")
JUDGED_PHASES = ("forward", "optimizer")
MIN_STEPS = 2

Variation = dict[int, frozenset]  # step -> the sizes that change there


@dataclass
class _Change:
    values: Variation
    origin: Mapping[str, Any]
    from_values: bool  # the origin has tensor inputs that do not change: its output size is data-dependent
    ops: set[str] = field(default_factory=set)
    phases: set[str] = field(default_factory=set)
    user: Frame | None = None
    shown: Variation = field(default_factory=dict)  # the sizes at the origin (values grows as ops join)

    def __post_init__(self) -> None:
        self.shown = dict(self.values)


# ATen ops whose output size depends on the values they read (`index` only with a boolean mask)
DATA_DEPENDENT = frozenset({"nonzero", "argwhere", "masked_select", "unique", "_unique", "_unique2", "unique_dim",
                            "unique_consecutive", "unique_dim_consecutive"})


def data_dependent(row: Mapping[str, Any]) -> bool:
    base = str(row["op"]).removeprefix("aten::").split(".", 1)[0]
    return base in DATA_DEPENDENT or (base == "index" and "bool" in row.get("dtypes", ()))


def _frame(row: Mapping[str, Any]) -> Frame | None:
    return Frame.from_json(row.get("user_frame"))


def _variation(calls: Mapping[int, list], side: int) -> Variation:
    """The sizes that differ between steps on one side (0 inputs, 1 outputs): by position where every step
    ran the op with one set of shapes of the same ranks, else the sizes not seen in every step."""
    per_step = {step: [call[side] for call in entries] for step, entries in calls.items()}
    steps = sorted(per_step)
    if all(len(v) == 1 for v in per_step.values()):
        shapes = [per_step[s][0] for s in steps]
        if len({tuple(len(dims) for dims in tensors) for tensors in shapes}) == 1 and len({len(t) for t in shapes}) == 1:
            out: dict[int, set] = {s: set() for s in steps}
            for tensor in zip(*shapes):
                for sizes in zip(*tensor):
                    if len(set(sizes)) > 1:
                        for step, size in zip(steps, sizes):
                            out[step].add(size)
            return {s: frozenset(v) for s, v in out.items()}
    values = {s: {d for shapes in v for dims in shapes for d in dims} for s, v in per_step.items()}
    common = set.intersection(*values.values()) if values else set()
    return {s: frozenset(v - common) for s, v in values.items()}


def _changes_across(variation: Variation) -> bool:
    return len(variation) >= MIN_STEPS and all(variation.values()) and len(set(variation.values())) > 1


def _explains(change: _Change, variation: Variation) -> bool:
    common = [s for s, v in change.values.items() if v and variation.get(s)]
    return len(common) >= MIN_STEPS and all(change.values[s] & variation[s] for s in common)


@dataclass
class _Op:
    """One ATen op at one user/library frame, its phases merged (a batch is made in `setup` on the first
    step and after the previous update on the others): its sizes per step."""

    row: Mapping[str, Any]
    phases: set[str]
    calls: dict[int, list]

    @property
    def backward_only(self) -> bool:
        return self.phases == {"backward"}


def _ops(rows: Iterable[Mapping[str, Any]]) -> list[_Op]:
    """The ATen ops whose shapes change between steps (the child writes them on an op's first row), with
    the phases of all its rows."""
    merged: dict[tuple, _Op] = {}
    phases: dict[tuple, set[str]] = {}
    for row in rows:
        if row.get("level") != "aten":
            continue
        key = (row["op"], tuple(row.get("dtypes", ())), repr(row.get("user_frame")), repr(row.get("library_frame")))
        phases.setdefault(key, set()).add(row["phase"])
        if row.get("step_shapes"):
            merged[key] = _Op(row, phases[key], {int(step): entries for step, entries in row["step_shapes"]})
    return list(merged.values())


def dynamic_shapes(rows: Iterable[Mapping[str, Any]]) -> list[_Change]:
    """The shape changes that reach forward, backward or the optimizer, each with the op it starts at.

    First the ops that make new sizes (no changing inputs, or a value-dependent op) start a change each,
    in first-call order; then every op joins the changes its inputs carry, and all the changing sizes of a
    joined op become sizes of those changes (`x.view(B * T, C)` makes B*T one); an op with changing inputs
    that no change explains starts one (its inputs came from outside the trace)."""
    ops = _ops(rows)
    sides = [(_variation(op.calls, 0), _variation(op.calls, 1)) for op in ops]
    changes: list[_Change] = []
    for op, (inputs, outputs) in zip(ops, sides):
        values = data_dependent(op.row)
        fresh_out = {s: v - inputs.get(s, frozenset()) for s, v in outputs.items()}
        if (not op.backward_only and (values or not any(inputs.values())) and _changes_across(fresh_out)
                and not any(_explains(c, fresh_out) for c in changes)):
            changes.append(_Change(fresh_out, op.row, values, {op.row["op"]}, set(op.phases)))
    for op, (inputs, outputs) in zip(ops, sides):
        joined = [c for c in changes if _explains(c, inputs)]
        explained = {s: frozenset().union(*(c.values.get(s, frozenset()) for c in joined)) for s in inputs}
        fresh_in = {s: v - explained[s] for s, v in inputs.items()}
        if not joined and not op.backward_only and _changes_across(fresh_in):
            joined = [_Change(fresh_in, op.row, False)]
            changes.append(joined[0])
        carried = inputs if data_dependent(op.row) else {  # a nonzero's count is a change of its own
            s: inputs.get(s, frozenset()) | outputs.get(s, frozenset()) for s in {*inputs, *outputs}}
        for change in joined:
            for step, sizes in carried.items():
                if sizes:
                    change.values[step] = change.values.get(step, frozenset()) | sizes
            change.ops.add(op.row["op"])
            change.phases.update(op.phases)
            if change.user is None and not op.backward_only:
                change.user = _frame(op.row)
    for change in changes:
        change.ops.add(change.origin["op"])
        change.user = _frame(change.origin) or change.user  # library code made it: the first user line it reached
    return [c for c in changes if c.phases & set(HOT_PHASES) and c.user is not None]


def _sizes(values: Variation) -> str:
    return ", ".join(f"step {s + 1}: {'/'.join(str(v) for v in sorted(vals, key=str))}" for s, vals in sorted(values.items()))


def _shape_site(change: _Change) -> PerfSite:
    assert change.user is not None
    op = str(change.origin["op"]).removeprefix("aten::")
    phases = "/".join(p for p in HOT_PHASES if p in change.phases)
    cause = (f"`{op}`'s output size depends on the values it reads" if change.from_values
             else f"`{op}` runs with sizes that change from step to step ({_sizes(change.shown)})")
    message = (f"{cause}, and {len(change.ops)} ATen op(s) in {phases} run with them: on Ascend every new "
               "shape compiles its operators again (host time on each step a shape is new, and a captured "
               "graph is rebuilt); keep shapes static: pad to a fixed length or a few fixed buckets"
               + ("; for a mask, `torch.where(mask, x, 0)` keeps the size" if change.from_values else ""))
    return PerfSite("dynamic-shape", change.user.path, change.user.line, change.user.function, op, message)


def _aicpu_sites(rows: Iterable[Mapping[str, Any]], version: str) -> list[PerfSite]:
    """One `aicpu-dtype` and one `aicpu-op` site per user line at most (an op's rows split by phase and frame)."""
    dtypes: dict[tuple[str, int], tuple[Frame, dict[str, set[str]]]] = {}
    guided: dict[tuple[str, int], tuple[Frame, str, aicpu_rules.GuideRule]] = {}
    for row in rows:
        user = _frame(row)
        if row.get("level") != "aten" or row.get("phase") not in JUDGED_PHASES or user is None:
            continue
        op = str(row["op"])
        where = (user.path, user.line)
        bad = aicpu_rules.outside_dtypes(op, tuple(row.get("dtypes", ())), tuple(row.get("out_dtypes", ())), version)
        if bad:
            dtypes.setdefault(where, (user, {}))[1].setdefault(op.removeprefix("aten::"), set()).update(bad)
        guide = aicpu_rules.guide_for(op, version)
        if guide is not None:
            guided.setdefault(where, (user, op.removeprefix("aten::"), guide))
    sites = []
    for (path, line), (user, by_op) in dtypes.items():
        named = sorted({d for bad in by_op.values() for d in bad})
        ops = ", ".join(f"`{op}`" for op in sorted(by_op))
        into = ", ".join(f"{d} to {aicpu_rules.CONVERT_TO.get(d, 'float32 or int32')}" for d in named)
        message = (f"data type {', '.join(named)} in {ops}: the advisor's AICPU rules for CANN {version} leave it "
                   f"off the AI Core, so the op may run on the AICPU (a slow CPU core on the NPU, with a task "
                   f"switch each time); convert {into} if possible ({aicpu_rules.SOURCE}, DataTypeChecker)")
        sites.append(PerfSite("aicpu-dtype", path, line, user.function, ops.replace("`", ""), message))
    for (path, line), (user, op, guide) in guided.items():
        message = (f"`{op}` is an operator the advisor's AICPU rules ({aicpu_rules.SOURCE}, {guide.checker}) "
                   f"give a replacement guide for: where it runs on the AICPU it stalls the stream; replace it "
                   f"with an equivalent operator ({guide.url})")
        sites.append(PerfSite("aicpu-op", path, line, user.function, op, message))
    return sites


@dataclass(frozen=True)
class LintResult:
    sites: tuple[PerfSite, ...]
    notes: tuple[str, ...]


def lint(rows: Iterable[Mapping[str, Any]], steps: int, cann_version: str | None) -> LintResult:
    """The census findings of the perf family; `steps`: the training steps the census ran."""
    rows = list(rows)
    version = aicpu_rules.checked_version(cann_version)
    notes = [f"AICPU rules: CANN {version} ({aicpu_rules.SOURCE})"]
    sites = _aicpu_sites(rows, version)
    if steps >= MIN_STEPS:
        sites += [_shape_site(c) for c in dynamic_shapes(rows)]
    else:
        notes.append("one step traced: shapes were not compared between steps (trace with --steps 2 or more)")
    return LintResult(tuple(sorted(sites, key=lambda s: (s.path, s.line, s.impl))), tuple(notes))
