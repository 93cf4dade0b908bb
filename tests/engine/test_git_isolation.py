"""Scanning an untrusted repository runs nothing from it: every command a `.git/config`,
`.gitattributes`, `.git/info/attributes`, a hook or a `GIT_*` variable names would leave a marker
file; `scan`, `fix` and `report` leave none. Each vector is first shown live with plain git (else
the test could not fail)."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from migrator.cli import main
from migrator.engine.git_files import project_files

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
CUDA = "import torch\nx = torch.zeros(2).cuda()\n"
VECTORS = ("fsmonitor", "hook", "filter_clean", "filter_process", "info_filter", "pager", "diff_external",
           "textconv", "env_external_diff", "env_pager")


def _marker_script(bin_dir: Path, marks: Path, name: str) -> str:
    script = bin_dir / name
    # a filter must still pass the content through, a process filter fails its handshake: both leave a mark
    script.write_text(f"#!/bin/sh\ntouch '{marks / name}'\ncat\n")
    script.chmod(0o755)
    return str(script)


def _git(cwd: Path, *args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=cwd, capture_output=True,
                          env=env, timeout=60, check=False)


@pytest.fixture
def hostile(tmp_path: Path) -> tuple[Path, Path, dict]:
    repo, marks, bin_dir = tmp_path / "repo", tmp_path / "marks", tmp_path / "bin"
    for folder in (repo, marks, bin_dir):
        folder.mkdir()
    (repo / "train.py").write_text(CUDA)
    (repo / "data.bin").write_text("x\n")
    (repo / "pyproject.toml").write_text('[project]\nname = "x"\n')
    (repo / ".gitattributes").write_text("*.py filter=evil diff=evildiff\n*.toml filter=proc\n")
    assert _git(repo, "init", "-q").returncode == 0
    assert _git(repo, "add", "-A").returncode == 0
    assert _git(repo, "commit", "-q", "-m", "init").returncode == 0
    m = {name: _marker_script(bin_dir, marks, name) for name in VECTORS}
    config = {
        "core.fsmonitor": m["fsmonitor"], "core.pager": m["pager"], "diff.external": m["diff_external"],
        "filter.evil.clean": m["filter_clean"], "filter.evil.smudge": m["filter_clean"],
        "filter.proc.process": m["filter_process"], "filter.info.clean": m["info_filter"],
        "diff.evildiff.textconv": m["textconv"],
    }
    for key, value in config.items():
        assert _git(repo, "config", key, value).returncode == 0
    (repo / ".git" / "info" / "attributes").write_text("*.bin filter=info\n")
    for hook in ("post-index-change", "pre-commit", "post-checkout", "reference-transaction"):
        shutil.copy(m["hook"], repo / ".git" / "hooks" / hook)
    env = {**os.environ, "GIT_EXTERNAL_DIFF": m["env_external_diff"], "GIT_PAGER": m["env_pager"]}
    future = time.time() + 5  # stat-dirty: status must hash the files again, through their filters
    for name in ("train.py", "data.bin", "pyproject.toml"):
        os.utime(repo / name, (future, future))
    return repo, marks, env


def _marks(marks: Path) -> list[str]:
    found = sorted(p.name for p in marks.iterdir())
    for p in marks.iterdir():
        p.unlink()
    return found


def test_each_vector_is_live_with_plain_git(hostile):
    repo, marks, env = hostile
    _git(repo, "status", "--porcelain", env=env)
    (repo / "train.py").write_text(CUDA + "y = 1\n")  # a diff to show: external diff and textconv run
    _git(repo, "diff", env=env)
    _git(repo, "diff", env={k: v for k, v in env.items() if k != "GIT_EXTERNAL_DIFF"})
    _git(repo, "diff", "--no-ext-diff", env=env)
    found = _marks(marks)
    # the pager runs only on a terminal: not shown live here, still switched off (core.pager, GIT_PAGER)
    for vector in ("fsmonitor", "hook", "filter_clean", "filter_process", "info_filter", "textconv",
                   "env_external_diff", "diff_external"):
        assert vector in found, f"{vector} was not triggered by plain git: {found}"


def test_scan_fix_report_run_nothing_from_the_repository(hostile, tmp_path, monkeypatch):
    repo, marks, env = hostile
    for key in ("GIT_EXTERNAL_DIFF", "GIT_PAGER"):
        monkeypatch.setenv(key, env[key])
    assert project_files(repo) is not None  # git was really asked
    runner = CliRunner()
    for args in (["scan", str(repo), "--no-cache"], ["report", str(repo), "-o", str(tmp_path / "r.html")],
                 ["fix", str(repo), "--no-cache"], ["scan", str(repo), "--format", "json", "--no-cache"]):
        result = runner.invoke(main, args)
        assert result.exit_code in (0, 1), (args, result.output)
        assert _marks(marks) == [], args
    assert "npu" in (repo / "train.py").read_text()
