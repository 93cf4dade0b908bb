"""The stage benchmark (``migrate validate --bench``) as typed records: one stage's ``perf`` and the
``scaling`` rows, as :mod:`.stages.bench` measures them, :mod:`.benchreport` renders them and the result
JSON holds them (``$defs/perf`` of ``validation.schema.json``).

``to_json`` writes the shape the result has always had (key order included). ``read`` takes a result
written by another tool or version (``migrate report``): unknown keys are ignored and a value of the
wrong kind is dropped, so its row shows ``-`` instead of the report failing. No torch here.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TypeVar

if typing.TYPE_CHECKING:
    from migrator.ground.jsonfile import JsonObject, JsonValue

COMM_KINDS = ("total", "all-reduce", "all-gather", "reduce-scatter", "all-to-all")
RATIO_NOTE = "migrated / original"


def _plain(record: object, *, leave_out: tuple[str, ...] = (), omit_none: tuple[str, ...] = ()) -> JsonObject:
    """``record``'s fields in declaration order (the JSON's key order): a nested record as its ``to_json``,
    a tuple as a list, a mapping as an object; ``omit_none`` fields only when set."""
    out: JsonObject = {}
    for f in dataclasses.fields(record):  # type: ignore[arg-type]
        value = getattr(record, f.name)
        if f.name not in leave_out and not (value is None and f.name in omit_none):
            out[f.name] = _json(value)
    return out


def _json(value: object) -> JsonValue:
    if isinstance(value, _Plain):
        return value.to_json()
    if isinstance(value, tuple):
        return [_json(item) for item in value]
    if isinstance(value, Mapping):
        return {str(k): _json(v) for k, v in value.items()}
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    raise TypeError(f"a bench record holds a {type(value).__name__}, which has no JSON form")


class _Plain:
    """A record whose JSON is its fields, in order (see :func:`_plain`)."""

    def to_json(self) -> JsonObject:
        return _plain(self)


@dataclass(frozen=True, kw_only=True)
class BenchConfig(_Plain):
    steps: int | None = None
    warmup: int | None = None
    repeats: int | None = None
    profile_steps: int | None = None
    timeout_s: float | None = None
    bf16_policy: str | None = None
    variant: str | None = None
    step: str | None = None  # what a timed step is



@dataclass(frozen=True, kw_only=True)
class StepTime(_Plain):
    """Seconds over the timed steps of every finished repeat (the slowest rank per step)."""

    median_s: float | None = None
    min_s: float | None = None
    max_s: float | None = None
    iqr_s: float | None = None
    stdev_s: float | None = None
    n: int | None = None



@dataclass(frozen=True, kw_only=True)
class RepeatFailure(_Plain):
    repeat: int | None = None
    kind: str | None = None  # crash, hang, nan, error
    reason: str = ""



@dataclass(frozen=True, kw_only=True)
class SideFigures(_Plain):
    """What the finished repeats of one side measured (absent when none finished)."""

    device: str | None = None
    device_name: str | None = None
    dtype: str | None = None
    how: str | None = None
    label: str | None = None
    step_time: StepTime | None = None
    samples_per_step: int | None = None
    tokens_per_step: int | None = None
    samples_per_s: float | None = None
    tokens_per_s: float | None = None
    flops_per_step: int | None = None
    achieved_tflops: float | None = None
    peak_tflops: float | None = None
    peak_source: str | None = None
    mfu: float | None = None
    mfu_note: str | None = None
    comm_share: Mapping[str, float | None] = field(default_factory=dict)  # COMM_KINDS -> share of a step
    peak_memory_bytes: int | None = None
    peak_memory_kind: str | None = None



@dataclass(frozen=True, kw_only=True)
class SidePerf:
    """One side of a stage benchmark: its repeats and, when any finished, their figures; or why it was
    not benchmarked (``skipped``)."""

    skipped: str | None = None
    ranks: int | None = None
    repeats: int | None = None
    ok_repeats: int | None = None
    crash_rate: float | None = None
    failures: tuple[RepeatFailure, ...] = ()
    figures: SideFigures | None = None  # JSON: its keys beside the repeats'

    def to_json(self) -> JsonObject:
        if self.skipped is not None:
            return {"skipped": self.skipped}
        out = _plain(self, leave_out=("skipped", "figures"))
        return {**out, **self.figures.to_json()} if self.figures else out

    @property
    def measured(self) -> SideFigures:
        """The figures, or none of them (every one renders as ``-``)."""
        return self.figures or NO_FIGURES


NO_FIGURES = SideFigures()


@dataclass(frozen=True, kw_only=True)
class StagePerf:
    """One stage's benchmark (``stages[].bench.perf``); only ``skipped`` when nothing could be timed."""

    skipped: str | None = None
    config: BenchConfig | None = None
    original: SidePerf | None = None
    migrated: SidePerf | None = None
    ratio: Mapping[str, float | None] = field(default_factory=dict)  # figure -> migrated / original
    ratio_note: str | None = None
    label: str | None = None  # CPU runs: what the figures prove

    def to_json(self) -> JsonObject:
        if self.config is None:
            return {"skipped": self.skipped} if self.skipped is not None else {}
        out: JsonObject = {"config": self.config.to_json()}
        # against a recorded reference the migrated side was measured first and the original noted after it
        recorded = self.original is not None and self.original.skipped is not None
        for name, side in (("migrated", self.migrated), ("original", self.original)) if recorded else \
                (("original", self.original), ("migrated", self.migrated)):
            if side is not None:
                out[name] = side.to_json()
        out["ratio"] = dict(self.ratio)
        out["ratio_note"] = self.ratio_note
        if self.label is not None:
            out["label"] = self.label
        return out

    @classmethod
    def read(cls, data: object) -> StagePerf:
        """A ``perf`` object from a result file (see the module docstring: lenient)."""
        return _read(cls, data) or cls()


@dataclass(frozen=True, kw_only=True)
class ScalingRow:
    """1 card (S1) -> N ranks (S2, S3) -> the supernode layout: the migrated side's throughput."""

    layout: str = "-"
    ranks: int | None = None
    throughput: float | None = None
    unit: str = "samples_per_s"
    efficiency: float | None = None  # throughput(N) / (N x throughput(1))
    measured: bool = False
    note: str | None = None

    def to_json(self) -> JsonObject:
        return _plain(self, omit_none=("note",))

    @classmethod
    def read_rows(cls, data: object) -> tuple[ScalingRow, ...]:
        """``bench.scaling`` from a result file (lenient; an entry that is no object is left out)."""
        rows = data if isinstance(data, list) else []
        return tuple(row for item in rows if (row := _read(cls, item)) is not None)


# ------------------------------------------------------------------------------ the lenient reader
RecordT = TypeVar("RecordT")
_DROP = object()  # a value of the wrong kind


def _read(cls: type[RecordT], data: object) -> RecordT | None:
    """``data`` as a ``cls`` record: its known keys of the right kind; None when ``data`` is no object."""
    if not isinstance(data, dict):
        return None
    hints = typing.get_type_hints(cls)
    fields = {f.name for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
    if "figures" in fields:  # a side's figures sit beside its repeats in the JSON
        data = dict(data, figures=data if "step_time" in data or "device" in data else None)
    values = {name: value for name in fields if name in data
              and (value := _value(hints[name], data[name])) is not _DROP}
    return cls(**values)


def _value(tp: object, value: JsonValue | object) -> object:
    """``value`` as ``tp`` (never converted, except an integer where a float is wanted), or ``_DROP``."""
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin in (typing.Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        for arm in args:
            if arm is not type(None) and (found := _value(arm, value)) is not _DROP:
                return found
        return _DROP
    if origin is tuple:
        items = value if isinstance(value, list) else []
        return tuple(v for item in items if (v := _value(args[0], item)) is not _DROP) if isinstance(value, list) \
            else _DROP
    if origin is Mapping:
        if not isinstance(value, dict):
            return _DROP
        return {str(k): v for k, item in value.items() if (v := _value(args[1], item)) is not _DROP}
    if isinstance(tp, type) and dataclasses.is_dataclass(tp):
        found = _read(tp, value)
        return _DROP if found is None else found
    if tp is float:
        return value if isinstance(value, (int, float)) and not isinstance(value, bool) else _DROP
    if tp is int:
        return value if isinstance(value, int) and not isinstance(value, bool) else _DROP
    return value if isinstance(tp, type) and type(value) is tp else _DROP
