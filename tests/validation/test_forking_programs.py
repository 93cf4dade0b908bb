"""`migrate plan TREE`, `migrate ops --trace` and `migrate validate` on a program that forks a
SIGTERM-ignoring grandchild and a `setsid` daemon when its validate.py is imported: no process is left,
by any ending (pass here, SIGTERM to migrate; timeout and Ctrl-C in test_process_scope.py)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("safetensors")

REPO = Path(__file__).resolve().parents[2]

PROTOCOL = '''
import os, subprocess, sys, time, types
import torch

_SLEEPER = [sys.executable, "-c",
            "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(600)"]
_started = [subprocess.Popen(_SLEEPER, stdout=subprocess.DEVNULL),
            subprocess.Popen(_SLEEPER, stdout=subprocess.DEVNULL, start_new_session=True)]
with open(os.environ["FORK_PIDS"], "a") as fh:
    fh.write("".join(f"{p.pid}\\n" for p in _started))

class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.a = torch.nn.Linear(8, 8, bias=False)
        self.config = types.SimpleNamespace(n_layer=1, n_embd=8, n_head=2, vocab_size=16)  # for `plan TREE`

    def forward(self, x):
        if os.environ.get("FORK_HANG"):
            time.sleep(600)
        return self.a(x)

def make_model(dropout=0.0):
    torch.manual_seed(0)
    return Net()

def make_batch(step):
    return {"x": torch.randn(4, 8, generator=torch.Generator().manual_seed(step))}

def loss_fn(out, batch):
    return out.float().pow(2).mean()
'''


@pytest.fixture
def forking_tree(tmp_path, monkeypatch):
    tree = tmp_path / "tree"
    tree.mkdir()
    (tree / "validate.py").write_text(PROTOCOL)
    (tree / "pyproject.toml").write_text("[project]\nname = 'forking'\n")  # the root: never a folder above
    pids = tmp_path / "pids"
    monkeypatch.setenv("FORK_PIDS", str(pids))
    return tree, pids


def _left(pids: list[int], grace: float = 5.0) -> list[int]:
    """The pids that still exist after ``grace`` seconds."""
    deadline = time.monotonic() + grace
    while any(os.path.exists(f"/proc/{p}") for p in pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    return [p for p in pids if os.path.exists(f"/proc/{p}")]


def _pids(path: Path) -> list[int]:
    return [int(p) for p in path.read_text().split()] if path.exists() else []


def test_plan_probe_of_a_forking_protocol_returns_at_once_and_leaves_nothing(forking_tree):
    from migrator.plan.probe import probe_tree

    tree, pids = forking_tree
    t0 = time.monotonic()
    shape = probe_tree(str(tree), timeout=120)  # the daemons hold no pipe of ours: no wait for the timeout
    assert time.monotonic() - t0 < 100
    assert shape.name == "tree"
    assert len(_pids(pids)) == 2
    assert _left(_pids(pids)) == []


def test_ops_trace_of_a_forking_program_leaves_nothing(forking_tree):
    from migrator import api

    tree, pids = forking_tree
    census, _, _ = api.trace_ops(tree)
    assert census.ops
    assert len(_pids(pids)) == 2
    assert _left(_pids(pids)) == []


@pytest.mark.slow
def test_a_passing_validate_of_a_forking_program_leaves_nothing(forking_tree, tmp_path):
    """(A timeout of a forking program: test_process_scope.py and test_validate_hang.py.)"""
    from migrator import api

    tree, pids = forking_tree
    result = api.validate(tree, migrated=str(tree), stages=("S1",), timeout=120.0, work_dir=str(tmp_path / "w1"))
    assert result.stage("S1").status == "pass", result.text()
    assert len(_pids(pids)) >= 4  # both sides imported validate.py
    assert _left(_pids(pids)) == []


@pytest.mark.slow
@pytest.mark.parametrize("signum", [signal.SIGTERM])  # SIGINT (Ctrl-C): test_process_scope.py
def test_a_signal_to_migrate_validate_leaves_nothing(forking_tree, tmp_path, signum):
    tree, pids = forking_tree
    env = {**os.environ, "FORK_HANG": "1", "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen([sys.executable, "-m", "migrator", "validate", str(tree), "--migrated", str(tree),
                             "--stages", "S1", "--timeout", "300"], cwd=tmp_path, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 120
    while len(_pids(pids)) < 4 and time.monotonic() < deadline:  # both sides started their daemons
        time.sleep(0.1)
    assert len(_pids(pids)) >= 4
    proc.send_signal(signum)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode != 0
    assert _left(_pids(pids)) == [], err.decode()[-2000:]
