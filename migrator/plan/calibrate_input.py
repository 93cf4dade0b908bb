"""The measured runs `migrate plan --calibrate` fits, read strictly: a bad value names the file and the field.

Three forms:
(a) the result JSON of `migrate validate --bench -o FILE`: every stage benchmark whose layout the result
    states (S1: one device; S2 under ddp or fsdp2: dp over its ranks), its migrated side's median step time
    (the original side's when the migrated one was not timed), global batch = samples per step and
    sequence = tokens / samples per step;
(b) a hand-written record, or several (`[...]` or `{"runs": [...]}`): see RECORD_FIELDS;
(c) a training log (`--calibrate-log`): Megatron-LM / MindSpeed lines matching LOG_PATTERN; the first
    matching line is warm-up (compilation, the first iterations), the median of the others is the step.
"""

from __future__ import annotations

import hashlib
import json
import re
import statistics
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .cost import Layout
from .model import ModelShape

# "elapsed time per iteration (ms): 1234.5", as Megatron-LM's training_log and MindSpeed print it
LOG_PATTERN = re.compile(r"elapsed time per iteration \(ms\):\s*([0-9]+(?:\.[0-9]*)?(?:[eE][-+]?[0-9]+)?)")
LOG_WARMUP_LINES = 1
MAX_INPUT_BYTES = 256 << 20

# a hand-written record: field -> what it holds (required unless marked optional)
RECORD_FIELDS = {
    "step_time_s": "seconds per optimizer step, measured (a positive number)",
    "layout": 'the layout it ran: {"tp": 2, "pp": 1, "dp": 4, "mb": 1, ...} or "tp=2,dp=4,mb=1"',
    "global_batch": "sequences per optimizer step (a whole number)",
    "seq_len": "tokens per sequence (a whole number)",
    "source": "where the time came from (a non-empty string)",
    "cluster": "optional: the cluster profile it ran on (else --cluster)",
    "model": "optional: a config path (relative to this file) or the config object (else MODEL / --model)",
    "dtype": "optional: bf16, fp16, fp8 or fp32 (else --dtype)",
}
_OPTIONAL = ("cluster", "model", "dtype")
_BENCH_VARIANTS = {None: 0, "ddp": 0, "fsdp2": 3}  # variant -> ZeRO stage of the data-parallel layout


class CalibrationInputError(ValueError):
    """A run file that cannot be used (the message names the file and the field)."""


@dataclass(frozen=True)
class MeasuredRun:
    file: str              # the file it came from
    sha256: str            # of that file
    where: str             # the entry inside it: "$.runs[1]", "$.stages[2] (S2)", "42 log lines"
    step_time_s: float
    layout: Layout
    global_batch: int
    seq: int
    source: str            # what the run was
    cluster: str | None = None
    model: ModelShape | None = None  # None: the command's MODEL
    dtype: str | None = None

    def label(self) -> str:
        return Path(self.file).name + ("" if self.where == "$" else f" {self.where}")


def _read(path: Path) -> tuple[bytes, str]:
    from migrator.ground.input_files import read_bytes

    try:
        data = read_bytes(path, MAX_INPUT_BYTES)
    except OSError as exc:
        raise CalibrationInputError(f"{path}: cannot read the run file: {exc}") from None
    return data, hashlib.sha256(data).hexdigest()


def read_runs(path: str | Path, load_model: Callable[[Path], ModelShape],
              layout_of: Callable[[str], Layout]) -> list[MeasuredRun]:
    """The runs of a `--calibrate` file (a bench result or hand-written records). `load_model` reads a
    record's model config path, `layout_of` a `--layout` string."""
    path = Path(path)
    data, digest = _read(path)
    try:
        doc = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise CalibrationInputError(f"{path}: not JSON: {exc}") from None
    if isinstance(doc, dict) and "stages" in doc:
        return _bench_runs(path, digest, doc)
    entries = doc.get("runs") if isinstance(doc, dict) and "runs" in doc else doc
    at = "$.runs" if entries is not doc else "$"
    if isinstance(entries, dict):
        return [_record(path, digest, entries, "$", load_model, layout_of)]
    if not isinstance(entries, list) or not entries:
        raise CalibrationInputError(f"{path}: {at}: expected a run record (an object with "
                                    f"{', '.join(RECORD_FIELDS)}), a non-empty list of them, or the result of "
                                    "`migrate validate --bench -o FILE`")
    return [_record(path, digest, entry, f"{at}[{i}]", load_model, layout_of) for i, entry in enumerate(entries)]


def _number(path: Path, where: str, name: str, value: object, whole: bool) -> Any:
    ok = isinstance(value, int) if whole else isinstance(value, (int, float))
    if not ok or isinstance(value, bool) or not value > 0:  # type: ignore[operator]
        raise CalibrationInputError(f"{path}: {where}.{name}: {RECORD_FIELDS[name]}, got {value!r}")
    return value


def _layout_text(path: Path, where: str, raw: object) -> str:
    if isinstance(raw, str):
        return raw
    if not isinstance(raw, dict) or not raw:
        raise CalibrationInputError(f"{path}: {where}.layout: {RECORD_FIELDS['layout']}, got {raw!r}")
    parts = []
    for key, value in raw.items():
        if isinstance(value, bool):
            value = "on" if value else "off"
        elif not isinstance(value, (int, str)):
            raise CalibrationInputError(f"{path}: {where}.layout.{key}: a whole number or a name, got {value!r}")
        parts.append(f"{key}={value}")
    return ",".join(parts)


def _record(path: Path, digest: str, entry: object, where: str, load_model: Callable[[Path], ModelShape],
            layout_of: Callable[[str], Layout]) -> MeasuredRun:
    if not isinstance(entry, dict):
        raise CalibrationInputError(f"{path}: {where}: a run record is an object, got {type(entry).__name__}")
    unknown = [k for k in entry if k not in RECORD_FIELDS]
    if unknown:
        raise CalibrationInputError(f"{path}: {where}.{unknown[0]}: unknown field (known: {', '.join(RECORD_FIELDS)})")
    missing = [k for k in RECORD_FIELDS if k not in entry and k not in _OPTIONAL]
    if missing:
        raise CalibrationInputError(f"{path}: {where}.{missing[0]}: missing ({RECORD_FIELDS[missing[0]]})")
    step = float(_number(path, where, "step_time_s", entry["step_time_s"], whole=False))
    batch = _number(path, where, "global_batch", entry["global_batch"], whole=True)
    seq = _number(path, where, "seq_len", entry["seq_len"], whole=True)
    for name in ("source", "cluster", "dtype"):
        value = entry.get(name, "-")
        if not isinstance(value, str) or not value.strip():
            raise CalibrationInputError(f"{path}: {where}.{name}: {RECORD_FIELDS[name]}, got {value!r}")
    if entry.get("dtype", "bf16") not in ("bf16", "fp16", "fp8", "fp32"):
        raise CalibrationInputError(f"{path}: {where}.dtype: {RECORD_FIELDS['dtype']}, got {entry['dtype']!r}")
    try:
        layout = layout_of(_layout_text(path, where, entry["layout"]))
    except ValueError as exc:
        raise CalibrationInputError(f"{path}: {where}.layout: {exc}") from None
    return MeasuredRun(str(path), digest, where, step, layout, batch, seq, entry["source"].strip(),
                       entry.get("cluster"), _model(path, where, entry.get("model"), load_model), entry.get("dtype"))


def _model(path: Path, where: str, raw: object, load_model: Callable[[Path], ModelShape]) -> ModelShape | None:
    from .configs import from_dict
    from .model import ModelError

    try:
        if raw is None:
            return None
        if isinstance(raw, dict):
            return from_dict(raw, "model", f"{path} {where}.model")
        if isinstance(raw, str) and raw.strip():
            return load_model(path.parent / raw)
    except ModelError as exc:
        raise CalibrationInputError(f"{path}: {where}.model: {exc}") from None
    raise CalibrationInputError(f"{path}: {where}.model: {RECORD_FIELDS['model']}, got {raw!r}")


def _bench_runs(path: Path, digest: str, doc: dict[str, Any]) -> list[MeasuredRun]:
    """The timed stages of a `migrate validate --bench` result whose layout it states."""
    from migrator.validation.parent.perf.records import StagePerf

    stages = doc["stages"]
    if not isinstance(stages, list):
        raise CalibrationInputError(f"{path}: $.stages: expected a list (a `migrate validate` result)")
    runs, skipped = [], []
    for i, stage in enumerate(stages):
        bench = stage.get("bench") if isinstance(stage, dict) else None
        if not isinstance(bench, dict) or not isinstance(bench.get("perf"), dict):
            continue
        where = f"$.stages[{i}] ({stage.get('id')})"
        perf = StagePerf.read(bench["perf"])
        variant = perf.config.variant if perf.config else None
        side_name, side = next(((n, s) for n, s in (("migrated", perf.migrated), ("original", perf.original))
                                if s is not None and s.figures is not None), (None, None))
        if side is None or side_name is None:
            skipped.append(f"{where}: no side was timed")
            continue
        fig, ranks = side.measured, side.ranks or 1
        if variant not in _BENCH_VARIANTS or (variant is None and ranks != 1):
            skipped.append(f"{where}: the {variant or 'model-parallel'} layout is not in the result")
            continue
        field = f"{where}.bench.perf.{side_name}"
        median = fig.step_time.median_s if fig.step_time else None
        for name, value in (("step_time.median_s", median), ("samples_per_step", fig.samples_per_step),
                            ("tokens_per_step", fig.tokens_per_step)):
            if value is None or value <= 0:
                raise CalibrationInputError(f"{path}: {field}.{name}: missing or not a positive number")
        assert median is not None and fig.samples_per_step and fig.tokens_per_step
        if fig.tokens_per_step % fig.samples_per_step or fig.samples_per_step % ranks:
            raise CalibrationInputError(f"{path}: {field}: tokens_per_step {fig.tokens_per_step} / samples_per_step "
                                        f"{fig.samples_per_step} / {ranks} ranks do not divide")
        layout = Layout(dp=ranks, zero=_BENCH_VARIANTS[variant] if ranks > 1 else 0, recompute="none",
                        micro_batch=fig.samples_per_step // ranks)
        dtype = {"bfloat16": "bf16", "float16": "fp16", "float32": "fp32"}.get(fig.dtype or "")
        source = (f"migrate validate --bench, stage {stage.get('id')} {side_name} side on "
                  f"{fig.device_name or fig.device or 'an unnamed device'}, median of {fig.step_time.n if fig.step_time else '?'} steps")
        runs.append(MeasuredRun(str(path), digest, where, float(median), layout, fig.samples_per_step,
                                fig.tokens_per_step // fig.samples_per_step, source, dtype=dtype))
    if not runs:
        raise CalibrationInputError(f"{path}: no stage benchmark with a stated layout (S1, or S2 under ddp / fsdp2) "
                                    "and a step time" + (f" ({'; '.join(skipped)})" if skipped else "")
                                    + ": run `migrate validate --bench -o FILE`, or write a hand record")
    return runs


def read_log(path: str | Path, layout: Layout, global_batch: int, seq: int) -> MeasuredRun:
    """The median step of a Megatron / MindSpeed training log after warm-up; the layout, batch and sequence
    are the command line's (`--layout`, `--global-batch`, `--seq`)."""
    path = Path(path)
    data, digest = _read(path)
    times = [float(m.group(1)) / 1e3 for m in LOG_PATTERN.finditer(data.decode("utf-8", errors="replace"))]
    if len(times) <= LOG_WARMUP_LINES:
        raise CalibrationInputError(
            f"{path}: {len(times)} line(s) match 'elapsed time per iteration (ms): N' (Megatron-LM / MindSpeed "
            f"training log); needs more than {LOG_WARMUP_LINES} (the first is warm-up)")
    timed = times[LOG_WARMUP_LINES:]
    if min(timed) <= 0:
        raise CalibrationInputError(f"{path}: an 'elapsed time per iteration (ms)' of 0")
    where = f"{len(timed)} log lines after {LOG_WARMUP_LINES} warm-up"
    return MeasuredRun(str(path), digest, where, statistics.median(timed), layout, global_batch, seq,
                       f"training log: median of {where} (elapsed time per iteration)")
