"""A rule is one unit (YAML + at most one module under migrator/rules/, found by the registry in
migrator/catalogue/units.py; its load-time errors: tests/catalogue/test_registry.py), and scan and fix ask it the
same question: the declined examples of the catalogue are manual in `scan` and declined by `fix`
with the same reason, and every declining branch of a precheck has such an example."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

from migrator.catalogue import units
from migrator.catalogue.loader import CatalogueError, load_catalogue
from migrator.catalogue.site import Declined
from tests.engine.helpers import scan_text
from tests.rules.examples import fix_example

CATALOGUE = load_catalogue()
DECLINED = [
    pytest.param(rule, ex, id=f"{rule.code}-declined-{i}")
    for rule in CATALOGUE.rules.values()
    for i, ex in enumerate(rule.declined)
]
RULES_DIR = Path(units.__file__).parents[1] / "rules"


def _with_target(code: str, file: str, target: str) -> str:
    return code + f'\n[tool.migrate]\ntarget = "{target}"\n' if file == "pyproject.toml" else code


@pytest.mark.parametrize("rule, example", DECLINED)
def test_declined_example_is_manual_in_scan_and_declined_by_fix_with_the_same_reason(tmp_path, rule, example):
    scanned = scan_text(tmp_path / "scan", example.code, name=example.file, target=example.target)
    at = {f"{f.line}:{f.column}": f for f in scanned.findings if f.code == rule.code}
    assert sorted(set(example.at) & set(at)) == sorted(example.at), f"{rule.code} reported at {sorted(at)}"
    for pos in example.at:
        finding = at[pos]
        assert finding.fix is None and finding.declined == example.reason
        assert example.reason in finding.message
    _, outcome = fix_example(tmp_path / "fix", _with_target(example.code, example.file, example.target),
                             example.file, example.target)
    declined = {(f"{f.line}:{f.column}", f.code): why for c in outcome.plan.changes for f, why in c.declined}
    for pos in example.at:
        assert declined.get((pos, rule.code)) == example.reason
    assert not [e for c in outcome.plan.changes for e in c.edits if e.code == rule.code]


def test_every_rule_with_a_fix_names_a_module_and_has_a_fixed_example():
    for rule in CATALOGUE.rules.values():
        if rule.fix == "none":
            continue
        assert units.unit(rule) is not None, rule.code
        assert any(ex.fixed for ex in rule.invalid), f"{rule.code}: no `fixed:` example"


def test_a_fix_without_a_fixed_example_is_a_catalogue_error(tmp_path):
    src = (RULES_DIR.parents[1] / "rules" / "coverage.yaml").read_text()
    (tmp_path / "coverage.yaml").write_text(src.replace("          fixed: |\n            torch==2.7.1\n"
                                                        "            torch-npu==2.7.1.post11\n            numpy\n", ""))
    with pytest.raises(CatalogueError, match="OPS008: a rule with a fix needs an invalid example with its `fixed` text"):
        load_catalogue.__wrapped__(tmp_path)


# -- every declining branch of a precheck has an example ---------------------------------------
def _trace_prechecks() -> tuple[set[tuple[str, int]], set[tuple[str, int]]]:
    """Scan every catalogue example with tracing on: (functions of migrator/rules that ran, as
    (file, first line); the (file, line) of every `Declined(...)` that was built)."""
    called: set[tuple[str, int]] = set()
    built: set[tuple[str, int]] = set()
    init = Declined.__init__.__code__
    root = str(RULES_DIR)

    def tracer(frame, event, arg):
        if event == "call":
            code = frame.f_code
            if code is init and frame.f_back is not None:
                built.add((frame.f_back.f_code.co_filename, frame.f_back.f_lineno))
            elif code.co_filename.startswith(root):
                called.add((code.co_filename, code.co_firstlineno))
        return None

    import tempfile

    examples = [(ex, ex.target) for rule in CATALOGUE.rules.values() for ex in (*rule.invalid, *rule.declined)]
    with tempfile.TemporaryDirectory() as tmp:
        for i, (ex, target) in enumerate(examples):
            folder = Path(tmp) / str(i)
            sys.settrace(tracer)
            try:
                scan_text(folder, ex.code, name=ex.file, target=target)
            finally:
                sys.settrace(None)
    return called, built


def _declined_calls(path: Path, ran: set[int]) -> set[int]:
    """Lines of `Declined(...)` in the functions of `path` that ran (their own bodies, not nested defs)."""
    lines: set[int] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.FunctionDef):
            first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
            if first not in ran:
                continue
            stack = list(node.body)
            while stack:
                child = stack.pop()
                if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
                    continue
                if isinstance(child, ast.Call) and isinstance(child.func, ast.Name) and child.func.id == "Declined":
                    lines.add(child.lineno)
                stack.extend(ast.iter_child_nodes(child))
    return lines


def test_every_declining_branch_of_a_precheck_has_a_declined_example():
    called, built = _trace_prechecks()
    assert called, "no precheck ran"
    missing = []
    for path in sorted(RULES_DIR.rglob("*.py")):
        ran = {line for file, line in called if file == str(path)}
        for line in sorted(_declined_calls(path, ran) - {ln for file, ln in built if file == str(path)}):
            missing.append(f"{path.relative_to(RULES_DIR.parent.parent)}:{line}")
    assert missing == [], "a precheck declines here but no `declined:` example reaches it"


def test_the_branch_check_sees_a_branch_no_example_reaches(tmp_path):
    module = tmp_path / "unit.py"
    module.write_text("def precheck(site):\n    if site:\n        return Declined('a')\n    return Declined('b')\n")
    assert _declined_calls(module, {1}) == {3, 4}
    assert _declined_calls(module, set()) == set()


# -- rename targets exist in torch_npu -----------------------------------------------------------
# torch_npu submodules the coverage table (built from torch_npu/npu/__init__.py's exports and the
# docs) does not list name by name; each was checked in the pinned wheel (the file named here).
OUTSIDE_TABLE = {
    "torch.npu.amp": "torch_npu/npu/amp/__init__.py (GradScaler, autocast)",
    "torch.npu.graphs": "torch_npu/npu/graphs.py",
    "torch.npu.random": "torch_npu/npu/random.py",
    "torch.npu.memory": "torch_npu/npu/memory.py (_record_memory_history, _snapshot, _dump_snapshot)",
    "torch_npu.npu.default_generators": "torch_npu/npu/__init__.py (default_generators)",
}


def _table_names() -> set[str]:
    import json

    table = Path(units.__file__).parents[2] / "op_coverage" / "torch_npu-2.14.0.json"
    return set(json.loads(table.read_text(encoding="utf-8"))["entries"])


def _missing_targets(names: set[str]) -> list[str]:
    missing = []
    for rule in CATALOGUE.rules.values():
        for pattern, replacement in rule.symbols:
            if not replacement or not replacement.startswith(("torch.npu", "torch_npu")):
                continue  # torch's own names (torch.autocast, torch.distributed...) and env variables
            base = replacement.rstrip("*").rstrip(".")
            listed = base in names or any(n.startswith(base + ".") for n in names)
            allowed = any(base == m or base.startswith(m + ".") for m in OUTSIDE_TABLE)
            if not (listed or allowed):
                missing.append(f"{rule.code}: {pattern} -> {replacement}")
    return missing


def test_every_rename_target_is_a_torch_npu_name():
    assert _missing_targets(_table_names()) == []


def test_a_rename_to_an_api_torch_npu_lacks_is_caught():
    assert "DEV001: torch.cuda.synchronize -> torch.npu.synchronize" in _missing_targets(_table_names() - {"torch.npu.synchronize"})


# -- renames keep the user's layout -----------------------------------------------------------------
def test_a_rename_changes_only_the_changed_name(tmp_path):
    code = "import torch\nx = (torch.cuda  # the cache\n     .empty_cache())\ntorch . cuda . synchronize()\n"
    after, _ = fix_example(tmp_path, code, "example.py", "npu")
    assert after.endswith("x = (torch.npu  # the cache\n     .empty_cache())\ntorch . npu . synchronize()\n")
