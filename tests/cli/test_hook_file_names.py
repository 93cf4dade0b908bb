"""The pre-commit hooks pass staged names after `--` (issue 38): a staged file named `-osetup.py` is a
file, not `-o setup.py` (the scan hook wrote its report over setup.py), and `--out=x.py` does not
redirect the fix hook. Each hook is run as pre-commit runs it: entry + args + the staged names."""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest
import yaml

from tests.conftest import REPO, run_cli

CUDA = "import torch\nx = y.cuda()\n"


def _hook_command(hook_id: str, *names: str) -> list[str]:
    hooks = {h["id"]: h for h in yaml.safe_load((REPO / ".pre-commit-hooks.yaml").read_text())}
    hook = hooks[hook_id]
    entry = shlex.split(hook["entry"])
    assert entry[0] == "migrate"
    return [*entry[1:], *hook.get("args", []), *names]


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    (tmp_path / "pyproject.toml").write_text("[project]\nname='x'\n")
    (tmp_path / "setup.py").write_text("from setuptools import setup\nsetup()\n")
    (tmp_path / "-osetup.py").write_text(CUDA)
    (tmp_path / "--out=x.py").write_text(CUDA)
    return tmp_path


def test_scan_hook_reads_a_dash_name_as_a_file(repo):
    proc = run_cli(*_hook_command("migrate-scan", "-osetup.py", "setup.py"), cwd=repo)
    assert proc.returncode == 1, proc.stderr  # the CUDA file's finding
    assert "-osetup.py" in proc.stdout
    assert (repo / "setup.py").read_text() == "from setuptools import setup\nsetup()\n"


def test_fix_hook_reads_a_dash_name_as_a_file(repo):
    proc = run_cli(*_hook_command("migrate-fix", "--out=x.py", "-osetup.py"), cwd=repo)
    assert proc.returncode in (0, 1), proc.stderr
    assert not (repo / "x.py").exists()
    assert "y.npu()" in (repo / "--out=x.py").read_text() and "y.npu()" in (repo / "-osetup.py").read_text()


def test_user_args_ending_with_the_separator_still_work(repo):
    proc = run_cli("fix", "--fail-on", "never", "--no-record", "--exact-only", "--numerics", "--", "-osetup.py",
                   cwd=repo)
    assert proc.returncode == 0, proc.stderr
    assert "y.npu()" in (repo / "-osetup.py").read_text()
