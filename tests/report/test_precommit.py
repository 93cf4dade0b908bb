"""The real pre-commit, end to end: `pre-commit run` installs this repository's hooks from a git copy
of the working tree (pre-commit clones a commit, and would only carry tracked files of an uncommitted
tree) and runs them in a fresh repository with a committed CUDA file. One hook repository and one pre-commit
home (tests/conftest.py `precommit_hooks`) serve every run of the test session, so the package is installed
once (`try-repo` makes a fresh store per call: one install each)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from tests.conftest import REPO

pytestmark = [pytest.mark.slow, pytest.mark.network]

# what `pip install .` needs to build the package, plus the hook manifest
HOOK_REPO_PATHS = [".pre-commit-hooks.yaml", "pyproject.toml", "README.md", "migrator", "rules", "op_coverage",
                   "framework_routes", "clusters", "ascend_env"]
# read as an empty global config; never os.devnull, which `git config --global` would replace
ABSENT_GIT_CONFIG = os.path.join(tempfile.gettempdir(), "migrate-tests-absent.gitconfig")
GIT_ENV = {
    "GIT_AUTHOR_NAME": "test", "GIT_AUTHOR_EMAIL": "test@example.invalid",
    "GIT_COMMITTER_NAME": "test", "GIT_COMMITTER_EMAIL": "test@example.invalid",
    "GIT_CONFIG_GLOBAL": ABSENT_GIT_CONFIG, "GIT_CONFIG_NOSYSTEM": "1",
}


def _pre_commit() -> list[str] | None:
    exe = shutil.which("pre-commit")
    if exe:
        return [exe]
    probe = subprocess.run([sys.executable, "-m", "pre_commit", "--version"], capture_output=True)
    return [sys.executable, "-m", "pre_commit"] if probe.returncode == 0 else None


def _git(cwd: Path, *args: str) -> None:
    subprocess.run(["git", "-c", "init.defaultBranch=main", *args], cwd=cwd, check=True, capture_output=True,
                   env={**os.environ, **GIT_ENV})


def _hook_repo(dest: Path) -> Path:
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard", "--", *HOOK_REPO_PATHS],
        cwd=REPO, capture_output=True, check=True,
    ).stdout.decode().split("\0")
    for rel in filter(None, listed):
        src = REPO / rel
        if src.is_file():
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / rel)
    _git(dest, "init", "-q")
    _git(dest, "add", "-A")
    _git(dest, "commit", "-q", "-m", "hooks under test")
    return dest


def _hook_config(hook_repo: Path, dest: Path) -> Path:
    """A config naming the hook repository at its commit, hooks in id order (as `try-repo` lists them)."""
    rev = subprocess.run(["git", "rev-parse", "HEAD"], cwd=hook_repo, capture_output=True, text=True,
                         check=True, env={**os.environ, **GIT_ENV}).stdout.strip()
    dest.write_text(f"repos:\n- repo: {hook_repo}\n  rev: {rev}\n  hooks:\n"
                    "  - id: migrate-fix\n  - id: migrate-scan\n")
    return dest


def _run_hooks(cmd: list[str], config: Path, project: Path, home: Path, *hook: str) -> tuple[int, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")}
    env.update(GIT_ENV, PRE_COMMIT_HOME=str(home), PRE_COMMIT_COLOR="never")
    proc = subprocess.run([*cmd, "run", "--config", str(config), *hook, "--all-files", "--verbose"],
                          cwd=project, capture_output=True, text=True, env=env, timeout=600)
    out = proc.stdout + proc.stderr
    if proc.returncode == 3 and ("Could not find a version" in out or "No matching distribution" in out
                                 or "Failed to establish a new connection" in out):
        pytest.skip(f"package registry not reachable: {out[-300:]}")
    return proc.returncode, out


def test_migrate_scan_hook_fails_then_fix_hook_fixes(tmp_path: Path, precommit_hooks: tuple[Path, Path]) -> None:
    cmd = _pre_commit()
    if cmd is None:
        pytest.skip("pre-commit is not installed (pip install pre-commit)")
    hook_repo, home = precommit_hooks
    config = _hook_config(hook_repo, tmp_path / "hooks-config.yaml")
    project = tmp_path / "project"
    project.mkdir()
    (project / "train.py").write_text("import torch\nx = torch.zeros(2).cuda()\n")
    (project / "NOTES.md").write_text("we call .cuda() everywhere\n")  # not a file the hooks read
    (project / "requirements.txt").write_text("torch\n")
    for i in range(12):  # enough files for pre-commit to split a parallel hook into batches
        (project / f"mod{i}.py").write_text("import torch\ny = torch.ones(2).cuda()\n")
    _git(project, "init", "-q")
    _git(project, "add", "-A")
    _git(project, "commit", "-q", "-m", "cuda code")

    rc, out = _run_hooks(cmd, config, project, home, "migrate-scan")
    assert rc == 1, out
    assert "train.py:2:" in out and "DEV010" in out and "Failed" in out
    assert "NOTES.md" not in out and "MIG00" not in out  # the files regex kept the Markdown file out
    assert out.count("Summary (root:") == 1, out  # one serial run: one summary, not one per batch

    # both hooks, in id order: migrate-fix rewrites train.py (pre-commit fails it: files were
    # modified), then migrate-scan sees the fixed file and passes
    rc, out = _run_hooks(cmd, config, project, home)
    assert rc == 1, out
    assert "files were modified by this hook" in out, out
    scan_line = next(line for line in out.splitlines() if line.startswith("migrate scan"))
    assert scan_line.rstrip().endswith("Passed"), out
    assert ".cuda()" not in (project / "train.py").read_text()
