"""An output never replaces an input (issue 38): `-o` / `--write-baseline` onto a scanned source or into
`.migrate/` is refused with exit 2 naming the path (unless --force); `fix --out` onto or into the tree
is a usage error, not an internal one."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import run_cli

CUDA = "import torch\nx = y.cuda()\n"


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    root.mkdir()
    (root / "pyproject.toml").write_text("[project]\nname='x'\n")
    (root / "train.py").write_text(CUDA)
    (root / ".migrate").mkdir()
    (root / ".migrate" / "fix-record.json").write_text('{"kept": true}\n')
    return root


@pytest.mark.parametrize("args", [
    ("scan", "-o", "train.py"),
    ("scan", "--write-baseline", "train.py"),
    ("scan", "-o", ".migrate/fix-record.json"),
    ("scan", "-o", ".migrate/fix-journal.json"),
    ("scan", "--write-baseline", ".migrate/baseline.json"),
    ("report", "-o", ".migrate/fix-record.json", "--format", "md"),
    ("report", "-o", "train.py", "--format", "md"),
])
def test_an_input_or_the_record_is_never_overwritten(repo, args):
    command, option, name, *rest = args
    proc = run_cli(command, str(repo), option, str(repo / name), *rest, "--no-cache", cwd=repo)
    assert proc.returncode == 2, proc.stderr
    assert str(repo / name) in proc.stderr and "--force" in proc.stderr
    assert (repo / "train.py").read_text() == CUDA
    assert (repo / ".migrate" / "fix-record.json").read_text() == '{"kept": true}\n'
    assert sorted(p.name for p in (repo / ".migrate").iterdir()) == ["fix-record.json"]


def test_force_writes_anyway(repo):
    proc = run_cli("scan", str(repo), "--format", "json", "-o", str(repo / "train.py"), "--force", "--no-cache")
    assert proc.returncode == 1, proc.stderr
    assert '"findings"' in (repo / "train.py").read_text()


def test_a_report_rewritten_in_the_tree_is_fine(repo):
    for _ in range(2):
        proc = run_cli("scan", str(repo), "--format", "json", "-o", str(repo / "out.json"), "--no-cache")
        assert proc.returncode == 1, proc.stderr


@pytest.mark.parametrize("where", ["tree", "inside"])
def test_fix_out_onto_or_into_the_tree_is_a_usage_error(repo, where):
    out = repo if where == "tree" else repo / "copy"
    proc = run_cli("fix", str(repo), "--out", str(out), "--no-cache")
    assert proc.returncode == 2 and "internal error" not in proc.stderr, proc.stderr
    assert f"--out {out}" in proc.stderr
    assert (repo / "train.py").read_text() == CUDA and not (repo / "copy").exists()


def test_fix_out_onto_a_busy_folder_is_a_clear_error(repo, tmp_path):
    busy = tmp_path / "busy"
    busy.mkdir()
    (busy / "keep.txt").write_text("mine")
    proc = run_cli("fix", str(repo), "--out", str(busy), "--no-cache")
    assert proc.returncode == 2 and "internal error" not in proc.stderr and "not empty" in proc.stderr, proc.stderr
    assert (busy / "keep.txt").read_text() == "mine"
