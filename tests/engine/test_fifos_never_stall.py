"""A FIFO where git or the fix expects a file never stalls a run (issue 38: a FIFO `.git/index`,
`.git/HEAD` or `core.excludesFile` cost every scan 240 s; one at `.migrate/fix-journal.json` hung
`fix` for ever). The subprocess timeout is only a guard so a regression fails instead of hanging."""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO

CUDA = "import torch\nx = y.cuda()\n"
GUARD_S = 60

pytestmark = pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs os.mkfifo")


def _cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO), "GIT_CONFIG_GLOBAL": str(cwd / "absent.gitconfig"),
           "XDG_CONFIG_HOME": str(cwd / "xdg")}
    return subprocess.run([sys.executable, "-m", "migrator", *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=GUARD_S, check=False)


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    if shutil.which("git") is None:
        pytest.skip("needs git")
    root = tmp_path / "repo"
    root.mkdir()
    (root / "pyproject.toml").write_text("[project]\nname='x'\n")
    (root / "train.py").write_text(CUDA)
    subprocess.run(["git", "init", "-q"], cwd=root, check=True)
    subprocess.run(["git", "add", "-A"], cwd=root, check=True)
    return root


@pytest.mark.parametrize("where", [".git/index", ".git/HEAD", "excludes"])
def test_scan_with_a_fifo_git_would_open_finishes(repo, where):
    if where == "excludes":
        fifo = repo / "global-ignore"
        subprocess.run(["git", "config", "core.excludesFile", str(fifo)], cwd=repo, check=True)
    else:
        fifo = repo / where
        fifo.unlink()
    os.mkfifo(fifo)
    proc = _cli("scan", str(repo), "--no-cache", "--format", "json", cwd=repo)
    assert proc.returncode == 1, proc.stderr
    assert '"train.py"' in proc.stdout


@pytest.mark.parametrize("name", ["fix-journal.json", "fix-record.json"])
def test_fix_with_a_fifo_in_migrate_finishes(repo, name):
    (repo / ".migrate").mkdir()
    fifo = repo / ".migrate" / name
    os.mkfifo(fifo)
    proc = _cli("fix", str(repo), "--no-cache", cwd=repo)
    assert proc.returncode in (0, 1, 2), proc.stderr
    assert not os.path.lexists(fifo) or stat.S_ISFIFO(os.lstat(fifo).st_mode)  # never written into as a file
    text = (repo / "train.py").read_text()
    assert text == CUDA or "y.npu()" in text  # never a half state


@pytest.mark.parametrize("where", [".git/index", "excludes"])
def test_scan_names_the_fifo_that_made_it_skip_git(repo, where):
    if where == "excludes":
        fifo = repo / "global-ignore"
        subprocess.run(["git", "config", "core.excludesFile", str(fifo)], cwd=repo, check=True)
    else:
        fifo = repo / where
        fifo.unlink()
    os.mkfifo(fifo)
    as_json = _cli("scan", str(repo), "--no-cache", "--format", "json", cwd=repo)
    skipped = {s["path"]: s["reason"] for s in json.loads(as_json.stdout)["skipped"]}
    named = where if where != "excludes" else "global-ignore"
    assert "git was not run" in skipped[named] and "FIFO" in skipped[named], skipped
    text = _cli("scan", str(repo), "--no-cache", cwd=repo)
    assert f"{named}: skipped: not a regular file (FIFO): git would block" in text.stdout + text.stderr
