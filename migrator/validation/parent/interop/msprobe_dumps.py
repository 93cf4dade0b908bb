"""Read dump folders made by msprobe itself (`PrecisionDebugger`, PyPI `mindstudio-probe`), in either
task (`statistics`: Max/Min/Mean/Norm per tensor; `tensor`: also `dump_tensor_data/*.pt`) and any level
(L0 `Module.<name>.<Class>.forward.<n>`, L1 `Functional.linear.0.forward`, mix). Layout:
`<dump>/step<k>/{rank<r>|proc<pid>}/{dump.json, stack.json, construct.json[, dump_tensor_data/]}`; the
folder given may be the dump root, one `step<k>` or one rank folder.

Records become `Record`s of flat `Slot`s (`input_args.0`, `input_kwargs.approximate`, `output.0`,
`parameters.weight`, `weight.0` of a `parameters_grad` record): tensors with their statistics and data
file, non-tensor arguments with their value. No torch here; tensors are loaded by the comparison."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .msprobe_stack_scopes import Frame, parse_frames, scopes_from_stacks

_STEP = re.compile(r"^step(\d+)$")
_RANK = re.compile(r"^(rank|proc)(\d+)$")
_KEY = re.compile(r"^(?P<api>.+?)\.(?:(?P<n1>\d+)\.(?P<d1>forward|backward)|(?P<d2>forward|backward)\.(?P<n2>\d+)|"
                  r"(?P<d3>parameters_grad)(?:\.(?P<n3>\d+))?)$")
_LIBRARY_FRAME = ("site-packages", "dist-packages", "/torch/", "/msprobe/", "<frozen")


class MsprobeDumpError(ValueError):
    """A folder that is not an msprobe dump, or a dump.json that cannot be read; the message names the file."""


@dataclass(frozen=True)
class Slot:
    path: str                 # input_args.0, input_kwargs.approximate, output.0, parameters.weight, ...
    kind: str                 # "tensor" or "value"
    dtype: str = ""
    shape: tuple[int, ...] = ()
    stats: tuple[tuple[str, float | None], ...] = ()  # (Max, Min, Mean, Norm) as recorded
    data_file: str = ""       # absolute path of the .pt (tensor task), "" in statistics mode
    value: Any = None         # non-tensor arguments: the recorded value
    requires_grad: bool | None = None  # as recorded (a parameter is True even inside the optimizer's no_grad)

    def stat(self, name: str) -> float | None:
        return dict(self.stats).get(name)


@dataclass(frozen=True)
class Record:
    key: str                  # Functional.gelu.0.forward
    api: str                  # Functional.gelu
    direction: str            # forward / backward / parameters_grad
    counter: int
    order: int                # position in dump.json (execution order)
    slots: tuple[Slot, ...]
    user_line: str = ""       # first stack frame outside torch / msprobe / site-packages
    scope: str = ""           # the enclosing module's record key (construct.json) or `optimizer`, "" when not known


@dataclass(frozen=True)
class RankDump:
    step: int | None          # None when the folder given was the step or rank folder itself
    rank: int
    folder: str
    task: str
    level: str
    records: tuple[Record, ...] = field(default_factory=tuple)

    @property
    def label(self) -> str:
        return (f"step{self.step}/" if self.step is not None else "") + f"rank{self.rank}"


def _is_tensor(node: dict) -> bool:
    return "dtype" in node and ("shape" in node or "data_name" in node or "Max" in node) and "value" not in node


def _slots(node: Any, path: str, data_dir: Path, out: list[Slot]) -> None:
    if isinstance(node, dict):
        if _is_tensor(node):
            data = node.get("data_name")
            out.append(Slot(path, "tensor", str(node.get("dtype", "")), tuple(node.get("shape") or ()),
                            tuple((k, node.get(k)) for k in ("Max", "Min", "Mean", "Norm")),
                            str(data_dir / data) if data and data != "-1" else "",
                            requires_grad=node["requires_grad"] if isinstance(node.get("requires_grad"), bool) else None))
        elif "type" in node and "value" in node:
            out.append(Slot(path, "value", value=node["value"]))
        else:
            for key, child in node.items():
                _slots(child, f"{path}.{key}" if path else str(key), data_dir, out)
    elif isinstance(node, list):
        for index, child in enumerate(node):
            _slots(child, f"{path}.{index}", data_dir, out)
    elif node is not None:
        out.append(Slot(path, "value", value=node))


def _split_key(key: str) -> tuple[str, str, int]:
    match = _KEY.match(key)
    if not match:
        return key, "forward", 0
    direction = match.group("d1") or match.group("d2") or match.group("d3")
    counter = match.group("n1") or match.group("n2") or match.group("n3") or "0"
    return match.group("api"), direction, int(counter)


_OPTIMIZER_FRAME = ("/torch/optim/", "\\torch\\optim\\")


def _user_lines(stack_file: Path) -> tuple[dict[str, str], set[str], dict[str, tuple[Frame, ...]]]:
    """({record key: first user frame}, keys called from inside `torch.optim`, {record key: its frames,
    outermost first}); stack.json is `{idx: [[keys], [frames]]}` (26.x) or `{key: [frames]}`."""
    try:
        doc = json.loads(stack_file.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}, set(), {}
    pairs: list[tuple[list[str], list[str]]] = []
    for key, value in doc.items() if isinstance(doc, dict) else ():
        if isinstance(value, list) and len(value) == 2 and all(isinstance(v, list) for v in value):
            pairs.append((value[0], value[1]))
        elif isinstance(value, list):
            pairs.append(([key], value))
    lines, in_optimizer, parsed = {}, set(), {}
    for keys, frames in pairs:
        parsed.update(dict.fromkeys(keys, parse_frames(frames)))
        if any(isinstance(f, str) and any(m in f for m in _OPTIMIZER_FRAME) for f in frames):
            in_optimizer.update(keys)
        user = next((f for f in frames if isinstance(f, str) and not any(m in f for m in _LIBRARY_FRAME)), "")
        if user:
            user = " ".join(part.strip() for part in user.replace("File ", "", 1).split("\n"))
            for key in keys:
                lines[key] = user
    return lines, in_optimizer, parsed


def _scopes(construct_file: Path) -> dict[str, str]:
    """{record key: enclosing module's record key}; construct.json maps each record to its parent (mix, L0)."""
    try:
        doc = json.loads(construct_file.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return {k: v for k, v in doc.items() if isinstance(k, str) and isinstance(v, str)} if isinstance(doc, dict) else {}


def read_rank(folder: Path, step: int | None, rank: int) -> RankDump:
    dump_file = folder / "dump.json"
    try:
        doc = json.loads(dump_file.read_text(encoding="utf-8"))
    except OSError as exc:
        raise MsprobeDumpError(f"{dump_file}: cannot read: {exc.strerror or exc}") from None
    except ValueError as exc:
        raise MsprobeDumpError(f"{dump_file}: not JSON ({exc})") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("data"), dict):
        raise MsprobeDumpError(f"{dump_file}: no 'data' object: not an msprobe dump.json")
    data_dir = folder / "dump_tensor_data"  # beside dump.json first: a copied dump keeps its old dump_data_dir
    if not data_dir.is_dir() and doc.get("dump_data_dir"):
        data_dir = Path(doc["dump_data_dir"])
    users, in_optimizer, frames = _user_lines(folder / "stack.json")
    # level L1 writes an empty construct.json: the modules are read from the stacks and the source instead
    scopes = _scopes(folder / "construct.json") or scopes_from_stacks(
        (key, _split_key(key)[0], frames.get(key, ())) for key in doc["data"])
    records = []
    for order, (key, value) in enumerate(doc["data"].items()):
        slots: list[Slot] = []
        _slots(value, "", data_dir, slots)
        api, direction, counter = _split_key(key)
        # level L1 writes no construct.json: a call from inside torch.optim is the optimizer's all the same
        scope = scopes.get(key) or ("optimizer" if key in in_optimizer else "")
        records.append(Record(key, api, direction, counter, order, tuple(slots), users.get(key, ""), scope))
    return RankDump(step, rank, str(folder), str(doc.get("task", "")), str(doc.get("level", "")), tuple(records))


def _rank_folders(step_dir: Path) -> list[tuple[int, Path]]:
    found = []
    for child in sorted(step_dir.iterdir()) if step_dir.is_dir() else ():
        if (match := _RANK.match(child.name)) and (child / "dump.json").is_file():
            found.append((match.group(1), int(match.group(2)), child))
    procs = [f for f in found if f[0] == "proc"]
    # proc<pid> folders (one process, no rank) are numbered in order
    return [(r, p) for kind, r, p in found if kind == "rank"] + [(i, p) for i, (_, _, p) in enumerate(procs)]


def read_dump(folder: str | Path) -> tuple[RankDump, ...]:
    """Every rank of every step under `folder` (a dump root, a step folder or a rank folder)."""
    root = Path(folder)
    if (root / "dump.json").is_file():
        return (read_rank(root, None, 0),)
    if not root.is_dir():
        raise MsprobeDumpError(f"{folder}: no such folder")
    if _STEP.match(root.name):
        return tuple(read_rank(p, None, r) for r, p in _rank_folders(root))
    dumps = []
    for step_dir in sorted(root.iterdir(), key=lambda p: (len(p.name), p.name)):
        if match := _STEP.match(step_dir.name):
            dumps += [read_rank(p, int(match.group(1)), r) for r, p in _rank_folders(step_dir)]
    if not dumps:
        raise MsprobeDumpError(f"{folder}: no step<k>/rank<r>/dump.json (or proc<pid>/dump.json) inside: "
                               "not an msprobe dump folder")
    return tuple(dumps)
