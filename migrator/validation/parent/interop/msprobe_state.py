"""What an msprobe dump says about state it does not record as such: the parameters each side built, and
the buffers a module reads.

* **As built.** Module records (levels L0, mix) carry their parameters; at the first step the values are
  those each side's own code built from the seed (msprobe's workflow), before any update. Every parameter
  that differs there is listed, not only the one the first divergence reads (`built_differently`): an
  init slip touches every parameter it initialises (`out_proj.weight` and `down_proj.weight`).
* **Unrecorded state.** msprobe records no buffer and no `__getitem__` / `view`. When a module's record
  shows its inputs and parameters equal to the original's and its output not, the difference arises inside
  it, in ops of its own forward; if none of the records inside it before the first divergence differs,
  what is left is what msprobe does not record. The buffers its forward reads (`register_buffer` names of
  its class, read as `self.<name>` in the function of the user's line, from the source file the stack
  names) are then named as the suspects (`unrecorded_state`), and at level L0, which records no op, the
  `torch_npu.*` ops that function calls; without the source, the module alone.
* **Level L1** (no module record): a first-step functional's weight argument that differs is a parameter as
  built (`built_differently_in_calls`); an input that no recorded op made and that is none of the original's
  tensors names what its method reads (`unrecorded_inputs`); a parameter no recorded line names, read only by
  indexing, names an optimizer update on an otherwise unnamed parameter (`unread_parameters`)."""

from __future__ import annotations

import ast
import math
import re
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ...verdict import Verdict
from .msprobe_dumps import RankDump, Record, Slot
from .user_source import source_tree

if TYPE_CHECKING:
    from .msprobe_record_verdicts import RecordVerdict, SlotVerdict

_MOST = 6
_WEIGHT_BIAS = {1: "weight", 2: "bias"}
# torch.nn.functional's parameter arguments by position: a record without its module's record (level L1)
PARAMETER_ARGS = {"Functional.linear": _WEIGHT_BIAS, "Functional.conv1d": _WEIGHT_BIAS,
                  "Functional.conv2d": _WEIGHT_BIAS, "Functional.conv3d": _WEIGHT_BIAS,
                  "Functional.embedding": {1: "weight"}, "Functional.layer_norm": {2: "weight", 3: "bias"},
                  "Functional.group_norm": {2: "weight", 3: "bias"}, "Functional.rms_norm": {2: "weight"}}
_CALLED_ATTRIBUTE = re.compile(r"self\.([\w.]+)\(")
_USER_LINE = re.compile(r"^(?P<file>.+?), line (?P<line>\d+), in (?P<func>[\w<>]+)")


def _module_name(key: str) -> tuple[str, str]:
    """`Module.a.b.Linear.forward.0` -> (`a.b`, `Linear`)."""
    parts = key.removeprefix("Module.").split(".")
    return ".".join(parts[:-3]), parts[-3] if len(parts) >= 3 else ""


def _first_forwards(dump: RankDump) -> dict[str, Record]:
    """{module name: its first forward record}, the module records that hold the parameters as built."""
    found: dict[str, Record] = {}
    for record in sorted(dump.records, key=lambda r: r.order):
        if record.key.startswith("Module.") and record.direction == "forward":
            found.setdefault(_module_name(record.key)[0], record)
    return found


def _differs(t: Slot, g: Slot, tolerance: float, load: Callable[[str], Any]) -> tuple[bool, str]:
    if t.shape != g.shape:
        return True, f"shape {list(g.shape)} → {list(t.shape)}"
    if t.data_file and g.data_file:
        from ... import metrics as M

        target, golden = load(t.data_file), load(g.data_file)
        if not golden.is_floating_point():
            return bool((target != golden).any()), "other values"
        value = M.rel_l2(target, golden)
        return value > tolerance, f"rel_l2 {value:.3g}, std {float(golden.double().std()):.4g} → {float(target.double().std()):.4g}"
    tn, gn = t.stat("Norm"), g.stat("Norm")
    if tn is None or gn is None:
        return False, ""
    ratio = f" ({tn / gn:.3g}x)" if gn else ""
    return abs(tn - gn) > tolerance * max(abs(gn), 1e-30), f"Norm {gn:.4g} → {tn:.4g}{ratio}"


def built_differently(pairs: Iterable[tuple[RankDump, RankDump]], tolerance: float,
                      load: Callable[[str], Any]) -> tuple[str, ...]:
    """`module (Class).parameter: how` for each parameter of a module record of the first step whose value
    differs from the original's (every rank; a name once), at most six and a count of the rest."""
    pairs = list(pairs)
    steps = [t.step for t, _ in pairs if t.step is not None]
    first_step = min(steps) if steps else None
    found: dict[str, str] = {}
    for t_dump, g_dump in pairs:
        if t_dump.step != first_step:
            continue
        golden = _first_forwards(g_dump)
        for name, record in _first_forwards(t_dump).items():
            other = golden.get(name)
            if other is None:
                continue
            g_params = {s.path: s for s in other.slots if s.path.startswith("parameters.") and s.kind == "tensor"}
            for slot in record.slots:
                if (g := g_params.get(slot.path)) is None or slot.kind != "tensor":
                    continue
                differs, how = _differs(slot, g, tolerance, load)
                label = f"{name} ({_module_name(record.key)[1]}).{slot.path.removeprefix('parameters.')}"
                if differs and label not in found:
                    found[label] = f"{label}: {how}"
    texts = list(found.values())
    return tuple(texts[:_MOST]) + ((f"(and {len(texts) - _MOST} more)",) if len(texts) > _MOST else ())


def _argument_label(record: Record, parameter: str) -> str:
    """`out_proj (RowParallelLinear).weight` by the record's module (construct.json); without one, by the
    attribute the user's line calls (`self.out_proj(x)` -> `out_proj.weight`); else the call and its line."""
    if record.scope.startswith("Module."):
        name, class_name = _module_name(record.scope)
        return f"{name} ({class_name}).{parameter}"
    code = record.user_line.rsplit(", in ", 1)[-1]
    if (called := _CALLED_ATTRIBUTE.search(code)) is not None:
        return f"{called.group(1)}.{parameter}"
    return f"the {parameter} {record.api} reads" + (f" at {record.user_line}" if record.user_line else "")


def built_differently_in_calls(pairs: Iterable[tuple[Record, Record]], tolerance: float,
                               load: Callable[[str], Any]) -> tuple[str, ...]:
    """Without module records (level L1): each weight / bias argument of a first-step forward `Functional.*`
    call (linear, conv, embedding, norms: `PARAMETER_ARGS`) that requires grad and differs from the original's,
    at its first read — before any update, so as built — named by `_argument_label`; as `built_differently`."""
    found: dict[str, str] = {}
    for t, g in sorted(pairs, key=lambda pair: pair[0].order):
        by_position = PARAMETER_ARGS.get(t.api, {}) if t.direction == "forward" else {}
        golden = {s.path: s for s in g.slots}
        for slot in t.slots:
            parameter = by_position.get(int(slot.path.split(".")[1])) if slot.path.startswith("input_args.") else None
            other = golden.get(slot.path)
            if not parameter or other is None or slot.kind != "tensor" or not slot.requires_grad:
                continue
            label = _argument_label(t, parameter)
            differs, how = _differs(slot, other, tolerance, load)
            if differs and label not in found:
                found[label] = f"{label}: {how}"
    texts = list(found.values())
    return tuple(texts[:_MOST]) + ((f"(and {len(texts) - _MOST} more)",) if len(texts) > _MOST else ())


def _passes_inputs_and_parameters(slots: Iterable[SlotVerdict]) -> bool:
    own = [s for s in slots if s.slot.startswith(("input_args", "input_kwargs", "parameters."))]
    return bool(own) and all(s.status == Verdict.PASS for s in own)


def _dotted(node: ast.expr) -> str:
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.insert(0, node.attr)
        node = node.value
    return ".".join([node.id, *parts]) if isinstance(node, ast.Name) else ""


def _read_in_source(user_lines: Iterable[str], class_name: str) -> tuple[list[str], list[str], str]:
    """(buffers of `class_name` read as `self.<name>` in the function of `user_lines`, the `torch_npu.*` ops
    that function calls, the source file's name)."""
    for line in user_lines:
        match = _USER_LINE.match(line)
        if not match:
            continue
        path = Path(match.group("file"))
        tree = source_tree(path)
        if tree is None:
            continue
        number = int(match.group("line"))
        for cls in (n for n in ast.walk(tree) if isinstance(n, ast.ClassDef) and n.name == class_name):
            function = next((f for f in ast.walk(cls) if isinstance(f, ast.FunctionDef)
                             and f.lineno <= number <= (f.end_lineno or f.lineno)), None)
            if function is None:
                continue
            buffers = _buffers_of(cls)
            read = [a.attr for a in ast.walk(function) if isinstance(a, ast.Attribute) and a.attr in buffers
                    and isinstance(a.value, ast.Name) and a.value.id == "self"]
            fused = {name for c in ast.walk(function) if isinstance(c, ast.Call)
                     and (name := _dotted(c.func)).startswith("torch_npu.")}
            return sorted(set(read)), sorted(fused), path.name
    return [], [], ""


def unrecorded_state(first: RecordVerdict, verdicts: Iterable[RecordVerdict], dump: RankDump) -> str:
    """The enclosing module whose inputs and parameters (its own and its submodules') match the original's
    while its output does not, with the buffers its forward reads (see the module docstring); "" when there
    is none or the first divergence (a RecordVerdict) is at an argument or a parameter."""
    worst = first.worst
    if first.argument_diffs or (worst is not None and (worst.slot.startswith("parameters.")
                                                       or worst.slot in dict(first.parameters))):
        return ""  # an argument or a parameter is the cause already
    first_key = first.key
    by_key = {r.key: r for r in dump.records}
    by_verdict = {v.key: v for v in verdicts}
    record = by_key.get(first_key)
    scope = record.scope if record is not None else ""
    while scope.startswith("Module.") and (module := by_key.get(scope)) is not None:
        verdict = by_verdict.get(scope)
        if verdict is None:
            return ""
        name, class_name = _module_name(scope)
        inner = [v for v in by_verdict.values() if v.key.startswith(f"Module.{name}.") and v.direction == "forward"]
        if verdict.status == Verdict.FAIL and _passes_inputs_and_parameters(verdict.slots) and all(
                s.status == Verdict.PASS for v in inner for s in v.slots if s.slot.startswith("parameters.")):
            inside = sorted((r for r in dump.records if r.scope == scope), key=lambda r: r.order)
            buffers, fused, source = _read_in_source((r.user_line for r in inside if r.user_line), class_name)
            where = (f"buffer(s) its forward reads: {', '.join(buffers)} (register_buffer in {source})"
                     if buffers else "buffers or attributes its forward reads, indexing and views")
            if fused and dump.level == "L0":  # at mix and L1 they are records of their own
                where += f"; fused op(s) it calls, which level L0 does not record: {', '.join(fused)} (in {source})"
            return (f"{name} ({class_name}): inputs and parameters as the original's, output not: the difference "
                    f"arises inside it, in a record only one side has or in what msprobe does not record — {where}")
        scope = module.scope
    return ""


def _size(slot: Slot) -> int:
    return math.prod(slot.shape)


def _same_tensor(t: Slot, g: Slot, tolerance: float) -> bool:
    """Same element count and statistics (a view or a permute keeps them), Norm within `tolerance`."""
    tn, gn = t.stat("Norm"), g.stat("Norm")
    return (_size(t) == _size(g) and tn is not None and gn is not None
            and abs(tn - gn) <= tolerance * max(abs(gn), 1e-30))


def _made_it(output: Slot, slot: Slot) -> bool:
    """`slot` is `output` seen through a view or a permute: its extremes exactly, its Norm up to the
    summation order."""
    return (output.stat("Max"), output.stat("Min")) == (slot.stat("Max"), slot.stat("Min")) and \
        _same_tensor(output, slot, 1e-6)


def _parameters_of(cls: ast.ClassDef) -> set[str]:
    """Attributes the class assigns an `nn.Parameter` (`self.table = nn.Parameter(...)`)."""
    return {target.attr for a in ast.walk(cls) if isinstance(a, ast.Assign) and isinstance(a.value, ast.Call)
            and _dotted(a.value.func).endswith("Parameter") for target in a.targets
            if isinstance(target, ast.Attribute) and _dotted(target.value) == "self"}


def unread_parameters(records: Iterable[Record]) -> list[str]:
    """The `nn.Parameter` attributes of the classes in the source files of the records' user lines that no
    recorded forward call's line names (`self.<name>`): read only by what msprobe does not record (indexing,
    `view`), so an optimizer record on such a parameter has no other name at level L1."""
    records = list(records)
    lines = [r.user_line for r in records if r.user_line and r.direction == "forward" and r.scope != "optimizer"]
    files = dict.fromkeys(m.group("file") for line in lines if (m := _USER_LINE.match(line)))
    found: list[str] = []
    for file in files:
        tree = source_tree(file)
        if tree is None:
            continue
        for cls in (n for n in ast.walk(tree) if isinstance(n, ast.ClassDef)):
            found += [f"{name} (an nn.Parameter of {cls.name} in {Path(file).name} that no recorded op's line reads)"
                      for name in sorted(_parameters_of(cls))
                      if not any(re.search(rf"\bself\.{name}\b", line) for line in lines)]
    return found


def _state_read_at(user_line: str) -> tuple[list[str], list[str], str]:
    """(buffers, parameters) of the class whose method holds the user's line that this method reads as
    `self.<name>` (`register_buffer` names; attributes assigned an `nn.Parameter`), and `Class.method in file`."""
    match = _USER_LINE.match(user_line)
    if not match:
        return [], [], ""
    path, number = Path(match.group("file")), int(match.group("line"))
    tree = source_tree(path)
    if tree is None:
        return [], [], ""
    for cls in (n for n in ast.walk(tree) if isinstance(n, ast.ClassDef)):
        function = next((f for f in cls.body if isinstance(f, ast.FunctionDef)
                         and f.lineno <= number <= (f.end_lineno or f.lineno)), None)
        if function is None:
            continue
        buffers = _buffers_of(cls)
        parameters = _parameters_of(cls)
        read = {a.attr for a in ast.walk(function) if isinstance(a, ast.Attribute)
                and isinstance(a.value, ast.Name) and a.value.id == "self"}
        return sorted(read & buffers), sorted(read & parameters), f"{cls.name}.{function.name} in {path.name}"
    return [], [], ""


def unrecorded_inputs(records: Iterable[Record], target: RankDump, golden: RankDump, tolerance: float) -> str:
    """Without module records (level L1): a tensor input of `records` (the first divergence and the port-only
    records right before it) that no earlier record of the target output and that is none of the original's
    tensors (element count and statistics) was made by what msprobe does not record (indexing, `view`, a
    buffer): named with the buffers and parameters the method of its user line reads; "" when none (or the
    method reads none)."""
    ordered = sorted(target.records, key=lambda r: r.order)
    golden_tensors = [s for r in golden.records if r.direction == "forward" for s in r.slots if s.kind == "tensor"]
    for record in sorted(records, key=lambda r: r.order):
        if record.direction != "forward" or not record.user_line:
            continue
        made = [s for r in ordered if r.order < record.order and r.direction == "forward"
                for s in r.slots if s.kind == "tensor" and s.path.startswith("output")]
        by_position = PARAMETER_ARGS.get(record.api, {})
        for slot in record.slots:
            if slot.kind != "tensor" or not slot.path.startswith("input") or slot.stat("Norm") is None:
                continue
            if slot.requires_grad and slot.path.startswith("input_args.") and \
                    int(slot.path.split(".")[1]) in by_position:
                continue  # a weight: parameters as built (`built_differently_in_calls`)
            if any(_made_it(m, slot) for m in made) or any(
                    _same_tensor(slot, g, tolerance) for g in golden_tensors):
                continue
            buffers, parameters, where = _state_read_at(record.user_line)
            read = [f"buffer(s) {', '.join(buffers)}"] if buffers else []
            read += [f"parameter(s) {', '.join(parameters)}"] if parameters else []
            if read:  # a slice of a recorded output (`conv(x)[..., :L]`) names nothing: no suspect to give
                return (f"{slot.path} of {record.key} (Norm {slot.stat('Norm'):.4g}) is none of the original's "
                        "tensors and no recorded op made it: made by what msprobe does not record (indexing, views) "
                        f"from what {where} reads: {'; '.join(read)}, at {record.user_line}")
    return ""


def _buffers_of(cls: ast.ClassDef) -> set[str]:
    """The buffer names a class registers with a literal name (`self.register_buffer("index", ...)`)."""
    return {c.args[0].value for c in ast.walk(cls) if isinstance(c, ast.Call)
            and isinstance(c.func, ast.Attribute) and c.func.attr == "register_buffer"
            and c.args and isinstance(c.args[0], ast.Constant) and isinstance(c.args[0].value, str)}
