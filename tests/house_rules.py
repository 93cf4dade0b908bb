"""Checkers behind tests/test_house_rules.py, over module sources (so a test can hand them a synthetic package).

A module is given as `Module(name, path, source)`: `name` its dotted import name (`migrator.routes.fix`), `path`
its file relative to the repository (how offences are named). The package of a module is the package that
holds it (`migrator.routes` for `migrator/routes/fix.py` and for `migrator/routes/__init__.py`).
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

TARGET_VALUES = frozenset({"npu", "portable"})
VERDICT_VALUES = frozenset({"pass", "warn", "fail", "skipped", "not_run", "error"})
TARGET_NAMES = frozenset({"target", "targets"})
VERDICT_NAMES = frozenset({"verdict", "verdicts", "status", "statuses"})
# where the enums live (made by other branches): the literals are defined there
ENUM_MODULES = frozenset({"migrator/ground/kinds.py", "migrator/validation/verdict.py"})
ANY_MAPPINGS = frozenset({"dict", "Dict", "Mapping", "MutableMapping"})


@dataclass(frozen=True)
class Module:
    name: str
    path: str
    source: str

    @cached_property
    def tree(self) -> ast.Module:
        return ast.parse(self.source, self.path)

    @property
    def is_package(self) -> bool:
        return self.path.endswith("__init__.py")

    @property
    def package(self) -> str:
        return self.name if self.is_package else self.name.rpartition(".")[0]


def repository_modules(top: str = "migrator") -> list[Module]:
    out = []
    for path in sorted((REPO / top).rglob("*.py")):
        rel = path.relative_to(REPO).as_posix()
        parts = rel[: -len(".py")].split("/")
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        out.append(Module(name, rel, path.read_text(encoding="utf-8")))
    return out


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def _absolute(module: Module, node: ast.ImportFrom) -> str:
    """The module an import-from names, relative imports resolved against the importer's package."""
    if not node.level:
        return node.module or ""
    base = module.package.split(".")
    base = base[: len(base) - (node.level - 1)] if node.level > 1 else base
    return ".".join([*base, *([node.module] if node.module else [])])


def _imports(module: Module) -> Iterator[tuple[ast.ImportFrom, str, ast.alias]]:
    """Every `from X import n` of the module (also inside functions), X absolute."""
    for node in ast.walk(module.tree):
        if isinstance(node, ast.ImportFrom):
            source = _absolute(module, node)
            for alias in node.names:
                yield node, source, alias


def _package_of(name: str, modules: dict[str, Module]) -> str:
    found = modules.get(name)
    return found.package if found is not None else name.rpartition(".")[0]


def _module_bindings(module: Module, modules: dict[str, Module]) -> dict[str, str]:
    """Local name -> module of ours it is bound to (`import migrator.a.b as m`, `from migrator.a import b`)."""
    bound: dict[str, str] = {}
    for node in ast.walk(module.tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.asname and alias.name in modules:
                    bound[alias.asname] = alias.name
    for _, source, alias in _imports(module):
        if f"{source}.{alias.name}" in modules:
            bound[alias.asname or alias.name] = f"{source}.{alias.name}"
    return bound


# ---------------------------------------------------------------------------------------- a. private names
def private_imports(modules: Iterable[Module]) -> set[tuple[str, str]]:
    """(importer path, "module:_name") for each private name one package takes from another: imported by
    name, or read as an attribute of a module of another package (`runner._read`)."""
    by_name = {m.name: m for m in modules}
    out: set[tuple[str, str]] = set()
    for module in by_name.values():
        for _, source, alias in _imports(module):
            if not source.startswith("migrator") and source not in by_name:
                continue
            if _private(alias.name) and _package_of(source, by_name) != module.package:
                out.add((module.path, f"{source}:{alias.name}"))
        bound = _module_bindings(module, by_name)
        for node in ast.walk(module.tree):
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and _private(node.attr):
                target = bound.get(node.value.id)
                if target is not None and by_name[target].package != module.package:
                    out.add((module.path, f"{target}:{node.attr}"))
    return out


# ---------------------------------------------------------------------------- b. dict[str, Any] in signatures
def _any_mapping(annotation: ast.expr | None) -> bool:
    if annotation is None:
        return False
    if isinstance(annotation, ast.Constant) and isinstance(annotation.value, str):
        try:
            annotation = ast.parse(annotation.value, mode="eval").body
        except SyntaxError:
            return False
    for node in ast.walk(annotation):
        if not isinstance(node, ast.Subscript):
            continue
        head = node.value.attr if isinstance(node.value, ast.Attribute) else getattr(node.value, "id", None)
        args = node.slice.elts if isinstance(node.slice, ast.Tuple) else []
        if head in ANY_MAPPINGS and len(args) == 2 and _simple_name(args[0]) == "str" and _simple_name(args[1]) == "Any":
            return True
    return False


def _simple_name(node: ast.expr) -> str | None:
    return node.attr if isinstance(node, ast.Attribute) else getattr(node, "id", None)


def _signature_has_any_mapping(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    a = fn.args
    params = [*a.posonlyargs, *a.args, *a.kwonlyargs, *([a.vararg] if a.vararg else []), *([a.kwarg] if a.kwarg else [])]
    return _any_mapping(fn.returns) or any(_any_mapping(p.annotation) for p in params)


def _definitions(module: Module) -> dict[str, ast.AST]:
    """Top-level functions and classes, and the names the module takes from others (followed on lookup)."""
    out: dict[str, ast.AST] = {}
    for node in module.tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            out[node.name] = node
    return out


def _resolve(name: str, module: Module, modules: dict[str, Module], depth: int = 0) -> tuple[Module, ast.AST] | None:
    """Where `name`, as seen in `module`, is defined: itself or through its re-exports."""
    found = _definitions(module).get(name)
    if found is not None:
        return module, found
    if depth > 5:
        return None
    for node in module.tree.body:
        if isinstance(node, ast.ImportFrom):
            source = _absolute(module, node)
            for alias in node.names:
                if (alias.asname or alias.name) == name and source in modules:
                    return _resolve(alias.name, modules[source], modules, depth + 1)
    return None


def _functions_of(node: ast.AST) -> Iterator[ast.FunctionDef | ast.AsyncFunctionDef]:
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        yield node
    elif isinstance(node, ast.ClassDef):
        for item in node.body:
            if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)):
                yield item


def any_mapping_signatures(modules: Iterable[Module]) -> set[str]:
    """"path:qualified name" of each function (or method of a class) another package imports, or calls
    through a module of ours, whose signature holds dict/Dict/Mapping[str, Any]."""
    by_name = {m.name: m for m in modules}
    used: set[tuple[str, str]] = set()  # (defining module, name)
    for module in by_name.values():
        for _, source, alias in _imports(module):
            if source in by_name and _package_of(source, by_name) != module.package:
                used.add((source, alias.name))
        bound = _module_bindings(module, by_name)
        for node in ast.walk(module.tree):
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in bound:
                target = bound[node.value.id]
                if by_name[target].package != module.package:
                    used.add((target, node.attr))
    out: set[str] = set()
    for source, name in used:
        resolved = _resolve(name, by_name[source], by_name)
        if resolved is None:
            continue
        home, node = resolved
        for fn in _functions_of(node):
            if _signature_has_any_mapping(fn):
                qual = fn.name if fn is node else f"{getattr(node, 'name', '?')}.{fn.name}"
                out.add(f"{home.path}:{qual}")
    return out


# ------------------------------------------------------------------ c. literals compared to a target/verdict
def _names_in(node: ast.expr) -> set[str]:
    out = set()
    for sub in ast.walk(node):
        if isinstance(sub, ast.Name):
            out.add(sub.id)
        elif isinstance(sub, ast.Attribute):
            out.add(sub.attr)
    return out


def _literals(node: ast.expr) -> set[str]:
    """The string constants of a literal side: `"npu"`, or a tuple / list / set of them."""
    items = node.elts if isinstance(node, (ast.Tuple, ast.List, ast.Set)) else [node]
    return {i.value for i in items if isinstance(i, ast.Constant) and isinstance(i.value, str)}


def _names_a(kind: frozenset[str], names: set[str]) -> bool:
    return any(n in kind or any(n.endswith("_" + k) for k in kind) for n in names)


def literal_comparisons(modules: Iterable[Module]) -> set[tuple[str, str]]:
    """(path, the comparison's source) where a target or verdict literal is compared with an expression
    that names a target or a verdict/status, outside the enum modules."""
    out: set[tuple[str, str]] = set()
    for module in modules:
        if module.path in ENUM_MODULES:
            continue
        for node in ast.walk(module.tree):
            if not isinstance(node, ast.Compare):
                continue
            sides = [node.left, *node.comparators]
            for left, right in zip(sides, sides[1:]):
                for literal_side, other in ((left, right), (right, left)):
                    values, names = _literals(literal_side), _names_in(other)
                    if (values & TARGET_VALUES and _names_a(TARGET_NAMES, names)) or (
                            values & VERDICT_VALUES and _names_a(VERDICT_NAMES, names)):
                        out.add((module.path, ast.unparse(node)))
    return out
