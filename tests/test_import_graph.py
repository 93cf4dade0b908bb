"""migrator/ has no import circle: the module graph (every import, lazy ones inside functions too)
is acyclic, so each layer can be read, tested and loaded without the ones above it."""

from __future__ import annotations

import ast
import functools
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "migrator"


def _module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def import_graph(package: Path) -> dict[str, set[str]]:
    """module -> the modules of the package it imports (``from pkg import sub`` counts as ``pkg.sub``)."""
    root = package.parent
    files = {_module_name(p, root): p for p in package.rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for name, path in files.items():
        here = name if path.name == "__init__.py" else name.rpartition(".")[0]
        targets: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                targets.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = here.split(".")[: len(here.split(".")) - node.level + 1]
                    module = ".".join(base + ([node.module] if node.module else []))
                else:
                    module = node.module or ""
                for alias in node.names:
                    sub = f"{module}.{alias.name}"
                    targets.add(sub if sub in files else module)
        graph[name] = {t for t in targets if t in files and t != name}
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import circle as [a, b, ..., a], or None."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                return path[path.index(nxt):] + [nxt]
            if nxt not in state and (found := visit(nxt)):
                return found
        path.pop()
        state[node] = 2
        return None

    for start in sorted(graph):
        if start not in state and (found := visit(start)):
            return found
    return None


def test_migrator_has_no_import_circle():
    graph = import_graph(PACKAGE)
    assert len(graph) > 50 and graph["migrator.api"]  # the walk saw the package
    cycle = find_cycle(graph)
    assert cycle is None, " -> ".join(cycle or [])


def test_a_circle_is_found(tmp_path):
    pkg = tmp_path / "pkg"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("def f():\n    from pkg.sub import b\n")  # lazy imports count
    (pkg / "sub" / "__init__.py").write_text("")
    (pkg / "sub" / "b.py").write_text("from .. import a\n")
    graph = import_graph(pkg)
    assert graph["pkg.a"] == {"pkg.sub.b"} and graph["pkg.sub.b"] == {"pkg.a"}
    assert find_cycle(graph) == ["pkg.a", "pkg.sub.b", "pkg.a"]


def _crossings(graph: dict[str, set[str]], side: str, other: str) -> list[str]:
    return sorted(f"{m} -> {t}" for m, targets in graph.items() if m.startswith(side)
                  for t in targets if t.startswith(other))


def test_validation_parent_and_child_never_import_each_other():
    """The parent side (orchestration, in the user's process) and the child side (the program's own
    process) meet only through the shared records of `migrator.validation` and a process boundary."""
    graph = import_graph(PACKAGE)
    parent, child = "migrator.validation.parent", "migrator.validation.child"
    assert any(m.startswith(parent) for m in graph) and any(m.startswith(child) for m in graph)
    assert _crossings(graph, parent, child) == []
    assert _crossings(graph, child, parent) == []
    shared = [m for m in graph if m.startswith("migrator.validation.") and not m.startswith((parent, child))]
    assert [f"{m} -> {t}" for m in shared for t in graph[m] if t.startswith((parent, child))] == []


def test_validation_never_imports_the_api():
    graph = import_graph(PACKAGE)
    assert sorted(f"{m} -> {t}" for m, ts in graph.items() if m.startswith("migrator.validation")
                  for t in ts if package_of(t) in ("api", "cli")) == []


# -- floors: the package graph -------------------------------------------------------------------
# Each top-level module or sub-package of migrator/ sits on one floor; an import (lazy ones included)
# may go down or stay on its floor, never up, and the packages form no circle.
FLOORS: tuple[tuple[str, frozenset[str]], ...] = (
    ("ground", frozenset({"migrator", "ground"})),  # data model, vocabularies, the writer, readers, git, globs
    ("catalogue", frozenset({"catalogue"})),  # the rule catalogue and the op coverage table
    ("engine", frozenset({"engine"})),
    ("fix", frozenset({"fix"})),
    ("rules", frozenset({"rules"})),  # the rule units: above fix/ (their `fix` uses its helpers), reached by name
    ("services", frozenset({"routes", "census", "validation", "plan", "doctor", "reporters"})),
    ("pipeline", frozenset({"pipeline"})),  # owns the scan and the fix transaction
    ("api", frozenset({"api"})),
    ("cli", frozenset({"cli", "__main__"})),
)
# Imports allowed to run up a floor (none: keep it so).
FLOOR_EXCEPTIONS: frozenset[tuple[str, str]] = frozenset()


@functools.cache
def migrator_graph() -> dict[str, set[str]]:
    return import_graph(PACKAGE)


def package_of(module: str) -> str:
    """`migrator.engine.scan_file` -> `engine`; `migrator.api` -> `api`; `migrator` -> `migrator`."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else parts[0]


def floor_of(package: str, floors=FLOORS) -> int:
    for level, (_, members) in enumerate(floors):
        if package in members:
            return level
    raise AssertionError(f"migrator.{package} sits on no floor: add it to FLOORS in tests/test_import_graph.py")


def upward_imports(graph: dict[str, set[str]], floors=FLOORS, exceptions=frozenset()) -> list[str]:
    return sorted(f"{m} -> {t} ({floors[floor_of(package_of(m), floors)][0]} -> {floors[floor_of(package_of(t), floors)][0]})"
                  for m, targets in graph.items() for t in targets
                  if floor_of(package_of(t), floors) > floor_of(package_of(m), floors) and (m, t) not in exceptions)


def package_graph(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    packages: dict[str, set[str]] = {package_of(m): set() for m in graph}
    for m, targets in graph.items():
        packages[package_of(m)].update(package_of(t) for t in targets if package_of(t) != package_of(m))
    return packages


def test_no_import_runs_up_a_floor():
    graph = migrator_graph()
    assert {package_of(m) for m in graph} >= {"catalogue", "rules", "engine", "fix", "api", "cli"}
    assert upward_imports(graph, exceptions=FLOOR_EXCEPTIONS) == []
    still_needed = {(m, t) for m, t in FLOOR_EXCEPTIONS if t in graph.get(m, set())}
    assert still_needed == FLOOR_EXCEPTIONS, "an exception no longer needed: remove it from FLOOR_EXCEPTIONS"


def test_the_packages_form_no_circle():
    graph = migrator_graph()
    cycle = find_cycle(package_graph(graph))
    assert cycle is None, " -> ".join(cycle or [])


def test_nothing_below_the_rules_floor_imports_a_rule_unit():
    """engine/, fix/, census/ and the catalogue reach the units only through the registry (importlib)."""
    graph = migrator_graph()
    below = [m for m in graph if floor_of(package_of(m)) < floor_of("rules") or package_of(m) == "census"]
    assert below and [f"{m} -> {t}" for m in below for t in graph[m] if package_of(t) == "rules"] == []


def test_an_upward_import_and_a_package_circle_are_found(tmp_path):
    pkg = tmp_path / "pkg"
    for sub in ("low", "high"):
        (pkg / sub).mkdir(parents=True)
        (pkg / sub / "__init__.py").write_text("")
    (pkg / "__init__.py").write_text("")
    (pkg / "low" / "a.py").write_text("def f():\n    from pkg.high import b\n")  # a lazy import counts
    (pkg / "high" / "b.py").write_text("from pkg.low import c\n")
    (pkg / "low" / "c.py").write_text("")
    graph = import_graph(pkg)
    floors = (("low", frozenset({"low", "pkg"})), ("high", frozenset({"high"})))
    assert upward_imports(graph, floors) == ["pkg.low.a -> pkg.high.b (low -> high)"]
    assert find_cycle(package_graph(graph)) == ["high", "low", "high"]  # no module circle, a package one
    assert find_cycle(graph) is None


def test_the_top_level_shows_the_floors():
    """migrator/ is a dozen or so packages, each on one floor: no loose modules besides the package's own
    ``__init__`` and ``__main__`` (issue 43)."""
    entries = sorted(p.name for p in PACKAGE.iterdir() if p.name != "__pycache__" and not p.name.endswith(".pyc"))
    loose = [e for e in entries if e not in ("__init__.py", "__main__.py") and not (PACKAGE / e).is_dir()]
    packages = [e for e in entries if (PACKAGE / e).is_dir()]
    assert loose == []
    assert len(packages) <= 14, packages
    assert [p for p in packages if not (PACKAGE / p / "__init__.py").is_file()] == []
    assert {p: floor_of(p) for p in packages}  # each sits on a floor (floor_of raises otherwise)


def test_the_op_coverage_generator_has_no_import_circle():
    graph = import_graph(PACKAGE.parent / "op_coverage")
    assert graph["op_coverage.table_build"]  # the walk saw the generator
    assert find_cycle(graph) is None, " -> ".join(find_cycle(graph) or [])
