"""Progress of long commands: drawn on stderr when stderr is a terminal (a pseudo-terminal here,
with stdout a pipe), never with -q, under CI, or when stderr is piped."""

from __future__ import annotations

import os
import pty
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO, run_cli

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="needs a pseudo-terminal")


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "proj"
    root.mkdir()
    (root / "pyproject.toml").write_text('[project]\nname = "p"\n')
    for i in range(3):
        (root / f"m{i}.py").write_text("import torch\nx = torch.zeros(2).cuda()\ntorch.cuda.synchronize()\n")
    return root


def _with_terminal_stderr(*args: str, env: dict | None = None) -> tuple[int, str, str]:
    """Run `python -m migrator ARGS` with stderr on a pseudo-terminal: (exit code, stdout, terminal bytes)."""
    master, slave = pty.openpty()
    full_env = {k: v for k, v in os.environ.items() if k not in ("CI", "FORCE_COLOR", "NO_COLOR")}
    full_env.update({"PYTHONPATH": str(REPO), "TERM": "xterm-256color", "COLUMNS": "120", **(env or {})})
    proc = subprocess.Popen([sys.executable, "-m", "migrator", *args], stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=slave, env=full_env, cwd=REPO)
    os.close(slave)
    seen = bytearray()
    while True:
        try:
            chunk = os.read(master, 65536)
        except OSError:  # EIO: the child closed its end
            break
        if not chunk:
            break
        seen += chunk
    stdout = proc.stdout.read().decode() if proc.stdout else ""
    proc.wait(timeout=300)
    if proc.stdout:
        proc.stdout.close()
    os.close(master)
    return proc.returncode, stdout, seen.decode(errors="replace")


def test_scan_shows_progress_on_a_terminal_with_counts(project):
    code, stdout, terminal = _with_terminal_stderr("scan", str(project), "--no-cache")
    assert code == 1 and "m0.py" in stdout  # stdout (a pipe) keeps the findings, undisturbed
    assert "scanning" in terminal and "4/4" in terminal and "ETA" in terminal  # 3 .py + pyproject.toml


@pytest.mark.parametrize("how", ["-q", "CI"])
def test_no_progress_with_quiet_or_in_ci(project, how):
    args, env = (["-q"], None) if how == "-q" else ([], {"CI": "true"})
    _, _, terminal = _with_terminal_stderr("scan", str(project), "--no-cache", *args, env=env)
    assert "scanning" not in terminal and "ETA" not in terminal


def test_no_progress_when_stderr_is_piped(project):
    proc = run_cli("report", str(project), "--diffs", "--format", "md", "--no-cache", env={"CI": ""})
    assert proc.returncode == 0 and "<details><summary>Files: " in proc.stdout
    assert "scanning" not in proc.stderr and "ETA" not in proc.stderr and "\x1b[" not in proc.stderr


def test_fix_and_report_diffs_show_their_phases(project):
    _, _, terminal = _with_terminal_stderr("report", str(project), "--diffs", "--format", "md", "--no-cache")
    assert "diffs: fixing" in terminal
    code, _, terminal = _with_terminal_stderr("fix", str(project), "--no-cache")
    assert "fixing" in terminal and "re-scanning" in terminal
    code, _, terminal = _with_terminal_stderr("fix", str(project), "--no-cache", "-q")
    assert "fixing" not in terminal and "ETA" not in terminal


@pytest.mark.slow
def test_validate_shows_its_stages_on_a_terminal_and_logs_them_when_piped():
    # the committed npu golden is `migrate fix`'s output (test_goldens): no migrate step in each run
    sample = [str(REPO / "samples" / "gpt"), "--migrated", str(REPO / "tests" / "golden" / "gpt" / "npu")]
    _, _, terminal = _with_terminal_stderr("validate", *sample, "--stages", "S0")
    assert "S0:" in terminal and "ETA" in terminal and "[validate]" not in terminal
    piped = run_cli("validate", *sample, "--stages", "S0", env={"CI": ""})
    assert "[validate] S0:" in piped.stderr and "ETA" not in piped.stderr
    _, _, terminal = _with_terminal_stderr("validate", *sample, "--stages", "S0", "-q")
    assert "S0:" not in terminal and "ETA" not in terminal
