"""migrator/ has no import circle: the module graph (every import, lazy ones inside functions too)
is acyclic, so each layer can be read, tested and loaded without the ones above it."""

from __future__ import annotations

import ast
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
                  for t in ts if t in ("migrator.api", "migrator.api_programs", "migrator.cli")) == []
