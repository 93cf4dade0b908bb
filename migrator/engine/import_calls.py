"""Modules bound by a call that names them, as the scanner's name resolution sees imports:
`cupy, has_cupy = optional_import("cupy")` (MONAI), `nvml = importlib.import_module("pynvml")`,
`cp = lazy_import("cupy")[0]`. The callee is any function whose name ends in `import` (or `import_module`,
`__import__`), its first argument the module's dotted name as a literal."""

from __future__ import annotations

import ast
import re
from collections import defaultdict
from collections.abc import Callable, Iterable

from migrator.engine.statements import iter_statements, may_bind_module

__all__ = ["attribute_modules", "bound_module", "collect_aliases", "may_bind_module"]

MODULE_NAME = re.compile(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)*")


def bound_module(node: ast.Assign) -> tuple[str, str] | None:
    """(local name, module) when the assignment binds a module by such a call, else None."""
    value = node.value.value if isinstance(node.value, ast.Subscript) else node.value
    if not (isinstance(value, ast.Call) and value.args and isinstance(value.args[0], ast.Constant)
            and isinstance(value.args[0].value, str) and MODULE_NAME.fullmatch(value.args[0].value)):
        return None
    callee = value.func.attr if isinstance(value.func, ast.Attribute) else getattr(value.func, "id", "")
    if not (callee.endswith("import") or callee in ("import_module", "__import__")):
        return None
    module = value.args[0].value
    target = node.targets[0] if len(node.targets) == 1 else None
    if isinstance(target, ast.Tuple) and target.elts:  # `mod, available = optional_import("mod")`
        target = target.elts[0]
    if not isinstance(target, ast.Name):
        return None
    return target.id, module.split(".")[0] if callee == "__import__" else module


def attribute_modules(statements: Iterable[ast.stmt], aliases: dict[str, set[str]],
                      manual: Callable[[str], bool]) -> dict[str, set[str]]:
    """`self.pynvml = pynvml` after `import pynvml` (ultralytics' GPU monitors): `self.pynvml` names the module,
    for the modules whose rule leaves the port to a person (`manual`); a rewritten name is never reached this way.
    `statements`: the module's statements (an assignment is one), or any part of them holding every assignment."""
    out: dict[str, set[str]] = {}
    bound: dict[str, set[str]] = {}  # each assigned name's modules, found when first assigned (most bind none)
    for node in statements:
        if type(node) is not ast.Assign or type(node.value) is not ast.Name:
            continue
        name = node.value.id
        modules = bound.get(name)
        if modules is None:
            modules = bound[name] = {m for m in aliases.get(name, ()) if "." not in m and manual(m)}
        for target in node.targets if modules else ():
            if isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name) and target.value.id == "self":
                out.setdefault(f"self.{target.attr}", set()).update(modules)
    return out


def collect_aliases(tree: ast.AST, statements: Iterable[ast.stmt] | None = None) -> dict[str, set[str]]:
    """Local name -> qualified names, from every import statement anywhere in the module."""
    aliases: dict[str, set[str]] = defaultdict(set)
    for node in iter_statements(tree) if statements is None else statements:
        if isinstance(node, ast.Assign):  # first: most of a module's binding statements are `self.x = x`
            if may_bind_module(node.value) and (bound := bound_module(node)):  # `cp = optional_import("cupy")`
                aliases[bound[0]].add(bound[1])
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.asname:
                    aliases[alias.asname].add(alias.name)
                else:
                    root = alias.name.split(".", 1)[0]
                    aliases[root].add(root)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            for alias in node.names:
                if alias.name == "*":
                    continue
                aliases[alias.asname or alias.name].add(f"{node.module}.{alias.name}")
    return aliases
