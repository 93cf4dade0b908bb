"""What the two sides' sources do differently, read statically where a dump shows that a boundary differs but
not why (level L0 records modules only). The sources are the files of each side's records (their stack's user
lines). Cause text only: it never changes a verdict.

* **The optimizer** (`optimizer_settings_diff`): when the optimizer's update of a parameter differs, the
  `torch.optim` constructor call of each side is read, and each keyword argument (a module-level constant
  resolved: `eps=ADAM_EPS` -> 1e-05) and each key of a literal param-group dict that differs is named.
* **Collectives** (`collective_diffs`): when a module's record differs, the `torch.distributed` collectives its
  class's forward calls, and those of the autograd.Functions it applies (in their forward or backward, as the
  record's direction), where the two sources differ: `CopyToModelParallelRegion.backward calls all_reduce in
  the original, none in the port` — L0 records no collective."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable

from .msprobe_dumps import Record
from .user_source import source_tree

_OPTIMIZERS = frozenset({"SGD", "Adam", "AdamW", "Adamax", "Adagrad", "Adadelta", "RMSprop", "NAdam", "RAdam",
                         "ASGD", "Rprop", "LBFGS", "SparseAdam", "Adafactor"})
_FILE = re.compile(r"^(?P<file>.+?), line \d+, in ")


def _constants(tree: ast.Module) -> dict[str, object]:
    """Module-level names bound to a literal (`ADAM_EPS = 1e-5`, `THETA, EPS = 500.0, 1e-5`)."""
    found: dict[str, object] = {}
    for node in tree.body:
        if not isinstance(node, ast.Assign) or len(node.targets) != 1:
            continue
        target, value = node.targets[0], node.value
        pairs = zip(target.elts, value.elts) if isinstance(target, ast.Tuple) and isinstance(value, ast.Tuple) \
            else [(target, value)]
        for name, literal in pairs:
            try:
                if isinstance(name, ast.Name):
                    found[name.id] = ast.literal_eval(literal)
            except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
                continue
    return found


def _value(node: ast.expr, constants: dict[str, object]) -> tuple[str, str]:
    """(the value as compared: a literal's repr, else the source text; as shown: `ADAM_EPS = 1e-05`)."""
    if isinstance(node, ast.Name) and node.id in constants:
        return repr(constants[node.id]), f"{node.id} = {constants[node.id]!r}"
    try:
        text = repr(ast.literal_eval(node))
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        text = ast.unparse(node)
    return text, text


def _settings(files: Iterable[str]) -> tuple[str, dict[str, tuple[str, str]]] | None:
    """(optimizer class, {setting: value}) of the first `torch.optim` constructor call in `files`; param-group
    dicts' keys as `param group <i> <key>`."""
    for file in files:
        tree = source_tree(file)
        if tree is None:
            continue
        constants = _constants(tree)
        for call in (n for n in ast.walk(tree) if isinstance(n, ast.Call)):
            func = call.func
            name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
            if name not in _OPTIMIZERS:
                continue
            found = {k.arg: _value(k.value, constants) for k in call.keywords if k.arg}
            groups = call.args[0] if call.args and isinstance(call.args[0], ast.List) else None
            for i, group in enumerate(groups.elts if groups is not None else ()):
                if isinstance(group, ast.Dict):
                    found |= {f"param group {i} {key.value!s}": _value(value, constants)
                              for key, value in zip(group.keys, group.values)
                              if isinstance(key, ast.Constant) and isinstance(key.value, str) and key.value != "params"}
            return name, found
    return None


def _files(records: Iterable[Record]) -> list[str]:
    return list(dict.fromkeys(m.group("file") for r in records if r.user_line and (m := _FILE.match(r.user_line))))


def optimizer_settings_diff(target: Iterable[Record], golden: Iterable[Record]) -> str:
    """`the optimizers the sources build differ: AdamW eps 1e-05 → not given (AdamW's default)`; "" when
    either side's optimizer cannot be read or both are built alike."""
    ours, theirs = _settings(_files(target)), _settings(_files(golden))
    if ours is None or theirs is None:
        return ""
    (t_name, t_set), (g_name, g_set) = ours, theirs
    diffs = [f"{g_name} → {t_name}"] if t_name != g_name else []
    for key in dict.fromkeys([*g_set, *t_set]):
        old, new = g_set.get(key), t_set.get(key)
        if (old or ("",))[0] != (new or ("",))[0]:
            diffs.append(f"{key} {old[1] if old is not None else 'not given'} → "
                         + (new[1] if new is not None else f"not given ({t_name}'s default)"))
    return ("the optimizers the sources build differ: " + ", ".join(diffs)) if diffs else ""


_COLLECTIVES = frozenset({"all_reduce", "all_gather", "all_gather_into_tensor", "reduce_scatter",
                          "reduce_scatter_tensor", "broadcast", "all_to_all", "all_to_all_single", "reduce"})


def _called(function: ast.AST) -> list[str]:
    """The collectives a function calls (`dist.all_reduce(...)`, `torch.distributed.all_gather(...)`)."""
    return sorted({c.func.attr for c in ast.walk(function) if isinstance(c, ast.Call)
                   and isinstance(c.func, ast.Attribute) and c.func.attr in _COLLECTIVES})


def _method(cls: ast.ClassDef, name: str) -> ast.AST | None:
    return next((f for f in cls.body if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef)) and f.name == name), None)


def _collectives(files: Iterable[str], class_name: str, direction: str) -> dict[str, list[str]] | None:
    """{`Class.method`: collectives} of `class_name`'s forward and of the autograd.Functions it applies (their
    `direction` method); None when the class is in none of `files`."""
    for file in files:
        tree = source_tree(file)
        if tree is None:
            continue
        classes = {c.name: c for c in ast.walk(tree) if isinstance(c, ast.ClassDef)}
        cls = classes.get(class_name)
        if cls is None:
            continue
        found = {f"{class_name}.forward": _called(forward)} if (forward := _method(cls, "forward")) else {}
        applied = {c.func.value.id for c in ast.walk(cls) if isinstance(c, ast.Call) and isinstance(c.func, ast.Attribute)
                   and c.func.attr == "apply" and isinstance(c.func.value, ast.Name)}
        for name in sorted(applied & set(classes)):
            if (method := _method(classes[name], direction)) is not None:
                found[f"{name}.{direction}"] = _called(method)
        return found
    return None


def collective_diffs(target: Iterable[Record], golden: Iterable[Record], module_key: str) -> str:
    """For a module record's key (`Module.<path>.<Class>.<direction>.<n>`): the collectives its class calls
    differently in the two sources (see the module docstring); "" when alike or unread."""
    parts = module_key.split(".")
    if not module_key.startswith("Module.") or len(parts) < 4 or parts[-2] not in ("forward", "backward"):
        return ""
    class_name, direction = parts[-3], parts[-2]
    ours, theirs = _collectives(_files(target), class_name, direction), _collectives(_files(golden), class_name, direction)
    if ours is None or theirs is None:
        return ""
    diffs = [f"{where} calls {', '.join(theirs.get(where, [])) or 'none'} in the original, "
             f"{', '.join(ours.get(where, [])) or 'none'} in the port"
             for where in dict.fromkeys([*theirs, *ours]) if theirs.get(where, []) != ours.get(where, [])]
    return (f"collectives in the source of {class_name}'s {direction}: " + "; ".join(diffs)) if diffs else ""
