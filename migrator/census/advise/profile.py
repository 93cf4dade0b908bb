"""Read a torch_npu profiler output (standard library only), in the documented formats of the Ascend
profiling guide, "timeline and summary data" (atlasprofiling_16_1149:
https://www.hiascend.com/document/detail/zh/canncommercial/latest/devaids/Profiling/atlasprofiling_16_1149.html):

* kernel_details.csv: Step Id, Name, Type, Accelerator Core (AI_CORE, AI_CPU, ...), Start Time(us),
  Duration(us), Wait Time(us), Block Dim, Input Shapes, Input Data Types, ... (a column may be absent);
* op_statistic.csv: OP Type, Core Type, Count, Total Time(us), Min/Avg/Max Time(us), Ratio(%);
* trace_view.json: Chrome trace events (a list, or an object with `traceEvents`), CANN's AscendCL calls
  among them (`aclrtSynchronizeStream`);
* step_trace_time.csv: Step, Computing, Communication(Not Overlapped), Overlapped, Communication, Free, ...

DIR is the `*_ascend_pt` folder, its ASCEND_PROFILER_OUTPUT folder, or a folder holding one `*_ascend_pt`.
A file that is missing is noted; one that cannot be read is an error naming it.
"""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

from .model import KernelRow, ProfileFacts

OUTPUT = "ASCEND_PROFILER_OUTPUT"
FILES = ("kernel_details.csv", "op_statistic.csv", "trace_view.json", "step_trace_time.csv")
MAX_BYTES = 512 * 1024 * 1024
SYNC_NAMES = ("aclrtSynchronizeStream", "SynchronizeStream", "aclrtSynchronizeDevice")


class ProfileError(ValueError):
    """The folder holds no profiler output, or a file of it cannot be read (the message names it)."""


def output_dir(folder: str | Path) -> Path:
    folder = Path(folder)
    if not folder.is_dir():
        raise ProfileError(f"{folder}: no such folder")
    for candidate in (folder if folder.name == OUTPUT else folder / OUTPUT,):
        if candidate.is_dir():
            return candidate
    found = sorted(p for p in folder.glob(f"*_ascend_pt/{OUTPUT}") if p.is_dir())
    if len(found) == 1:
        return found[0]
    if found:
        raise ProfileError(f"{folder}: {len(found)} profiles (*_ascend_pt); name one: "
                           + ", ".join(str(p.parent) for p in found[:5]))
    raise ProfileError(f"{folder}: no {OUTPUT} folder (a torch_npu profile is a *_ascend_pt folder holding one)")


def _text(path: Path) -> str:
    from migrator.ground.input_files import InputRefused, read_text

    try:
        return read_text(path, MAX_BYTES, errors="replace")
    except (OSError, InputRefused) as exc:
        raise ProfileError(f"{path}: cannot read: {exc}") from None


def _rows(path: Path, required: tuple[str, ...]) -> list[dict[str, str]]:
    reader = csv.DictReader(io.StringIO(_text(path).lstrip("\ufeff")))
    columns = [c.strip() for c in reader.fieldnames or ()]
    missing = [c for c in required if c not in columns]
    if missing:
        raise ProfileError(f"{path}: no column {', '.join(missing)} (columns: {', '.join(columns) or 'none'})")
    return [{(k or "").strip(): (v or "").strip() for k, v in row.items()} for row in reader]


def _number(value: str, path: Path, column: str) -> float:
    try:
        return float(value) if value not in ("", "N/A") else 0.0
    except ValueError:
        raise ProfileError(f"{path}: {column} {value!r} is not a number") from None


def _kernels(path: Path) -> tuple[KernelRow, ...]:
    rows = _rows(path, ("Name", "Type", "Accelerator Core", "Duration(us)"))
    return tuple(KernelRow(r["Name"], r["Type"], r["Accelerator Core"], _number(r["Duration(us)"], path, "Duration(us)"),
                           r.get("Input Data Types", ""), r.get("Input Shapes", ""), r.get("Step Id", r.get("Step ID", "")),
                           r.get("Output Data Types", ""))
                 for r in rows)


def _op_types(path: Path) -> tuple[tuple[str, str, int, float], ...]:
    rows = _rows(path, ("OP Type", "Core Type", "Count", "Total Time(us)"))
    return tuple((r["OP Type"], r["Core Type"], int(_number(r["Count"], path, "Count")),
                  _number(r["Total Time(us)"], path, "Total Time(us)")) for r in rows)


def _syncs(path: Path) -> tuple[int, float]:
    try:
        data = json.loads(_text(path))
    except json.JSONDecodeError as exc:
        raise ProfileError(f"{path}: not JSON: {exc}") from None
    events = data.get("traceEvents", []) if isinstance(data, dict) else data
    if not isinstance(events, list):
        raise ProfileError(f"{path}: no trace event list")
    calls, total = 0, 0.0
    for event in events:
        if isinstance(event, dict) and any(name in str(event.get("name", "")) for name in SYNC_NAMES):
            calls += 1
            duration = event.get("dur", 0)
            total += float(duration) if isinstance(duration, (int, float)) else 0.0
    return calls, total


def _steps(path: Path) -> tuple[tuple[str, float, float], ...]:
    rows = _rows(path, ("Step", "Computing", "Free"))
    return tuple((r["Step"], _number(r["Computing"], path, "Computing"), _number(r["Free"], path, "Free")) for r in rows)


def read(folder: str | Path) -> ProfileFacts:
    out = output_dir(folder)
    present = tuple(name for name in FILES if (out / name).is_file())
    notes = tuple(f"{name} not in the profile: its checks are not checkable" for name in FILES if name not in present)
    sync_calls, sync_us = _syncs(out / "trace_view.json") if "trace_view.json" in present else (0, 0.0)
    return ProfileFacts(
        str(out), present,
        kernels=_kernels(out / "kernel_details.csv") if "kernel_details.csv" in present else (),
        op_types=_op_types(out / "op_statistic.csv") if "op_statistic.csv" in present else (),
        sync_calls=sync_calls, sync_us=sync_us,
        steps=_steps(out / "step_trace_time.csv") if "step_trace_time.csv" in present else (),
        notes=notes)
