"""`--target portable` keeps behaviour on this CPU-only host: every fixture and sample tree, original
and portable output, each file run as an import (tests/behaviour/child.py): the same outcome, the same
output, the same lines executed (device-type guards included: a branch taken differently shows as a
different line), and no import error the original did not have. Files without a finding stay as they were.

Lines are compared through the fix's diff: a line the fix left unchanged has a counterpart in the migrated
file (difflib), and the executed ones among them must be the same on both sides.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from migrator import api
from tests.conftest import REPO

pytest.importorskip("torch")

CHILD = Path(__file__).with_name("child.py")
TREES = sorted(
    [p for p in (REPO / "samples").iterdir() if p.is_dir()]
    + [p for p in (REPO / "tests" / "fixtures").iterdir()
       if p.is_dir() and p.name != "fix" and next(p.rglob("*.py"), None)]  # profiles/: data, no module to import
)


def _record(trees: list[Path], dest: Path) -> dict:
    proc = subprocess.run([sys.executable, str(CHILD), str(dest), *map(str, trees)], capture_output=True, text=True,
                          timeout=600, env={"CUDA_VISIBLE_DEVICES": "", "PATH": "/usr/bin:/bin", "PYTHONHASHSEED": "0"})
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(dest.read_text())


def _unchanged_lines(before: str, after: str) -> dict[int, int]:
    """1-based original line -> migrated line, for the lines the fix left as they were (the fix's own
    line alignment: unique lines anchor it, so a helper's `try:` is not taken for the user's)."""
    from migrator.fix.line_map import line_opcodes

    pairs: dict[int, int] = {}
    for tag, i1, i2, j1, _ in line_opcodes(before.splitlines(), after.splitlines()):
        if tag == "equal":
            pairs.update({i1 + k + 1: j1 + k + 1 for k in range(i2 - i1)})
    return pairs


def _import_lines(text: str) -> set[int]:
    import ast

    return {n.lineno for n in ast.walk(ast.parse(text)) if isinstance(n, (ast.Import, ast.ImportFrom))}


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """Every tree copied twice, one copy fixed for portable, each side run once (one torch start per side)."""
    base = tmp_path_factory.mktemp("behaviour")
    edits = {}
    for tree in TREES:
        for side in ("original", "portable"):
            shutil.copytree(tree, base / side / tree.name)
            (base / side / tree.name / "pyproject.toml").touch()
        portable = base / "portable" / tree.name
        scanned = api.scan([portable], root=portable, use_cache=False)
        outcome = api.fix([portable], root=portable, target="portable", use_cache=False)
        edited = {p for p in outcome.changed_files if not p.endswith("_migrate_runtime.py")}
        edits[tree.name] = (edited, {f.path for f in scanned.findings})
    before = _record([base / "original" / t.name for t in TREES], base / "before.json")
    after = _record([base / "portable" / t.name for t in TREES], base / "after.json")
    return base, edits, before, after


@pytest.mark.slow
@pytest.mark.parametrize("tree", TREES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_portable_output_behaves_like_the_original_on_a_cpu_host(runs, tree):
    base, edits, before, after = runs
    edited, with_findings = edits[tree.name]
    assert edited <= with_findings, f"edited without a finding: {sorted(edited - with_findings)}"
    mine = [rel for rel in before if rel.startswith(f"{tree.name}/")]
    assert mine and set(mine) == {rel for rel in after if rel.startswith(f"{tree.name}/")}
    for rel in mine:
        b, a = before[rel], after[rel]
        assert "_migrate" not in a["outcome"], f"{rel}: {a['outcome']}"  # the runtime import always resolves
        if b["outcome"] != "ok":
            continue  # it did not import before either (a CUDA-only library): nothing to keep
        assert a["outcome"] == "ok", f"{rel}: imported before, {a['outcome']} after"
        assert a["stdout"] == b["stdout"], rel
        text = (base / "original" / rel).read_text()
        pairs = _unchanged_lines(text, (base / "portable" / rel).read_text())
        for n in _import_lines(text):  # `import amp_C` after a removed `from apex import amp` in one `try`:
            pairs.pop(n, None)  # reached now, failing as before; the branch it leads to is compared
        ran_before = {pairs[n] for n in b["lines"] if n in pairs}
        ran_after = set(a["lines"]) & set(pairs.values())
        assert ran_after == ran_before, f"{rel}: other lines ran (a guard took another branch)"
