"""A pooled scan's workers die with it: SIGTERM, SIGINT or even SIGKILL to `migrate scan -j 2`
leaves no worker process running (bounded waits, no timing asserts)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import REPO

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads the process table from /proc"),
]
N_FILES = 4000
SOURCE = "import torch\nimport torch.distributed as dist\n" + "x = torch.zeros(2).cuda()\ntorch.cuda.synchronize()\n" * 40


def _children(pid: int) -> set[int]:
    """Live (non-zombie) processes whose parent is `pid`."""
    found = set()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        state, ppid = stat.rsplit(")", 1)[1].split()[:2]
        if int(ppid) == pid and state != "Z":
            found.add(int(entry.name))
    return found


def _alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def _wait(condition, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.1)
    return condition()


@pytest.fixture(scope="module")
def big_tree(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("big")
    (root / "pyproject.toml").write_text('[project]\nname = "big"\n')
    for i in range(N_FILES):
        folder = root / f"pkg{i // 200}"
        folder.mkdir(exist_ok=True)
        (folder / f"m{i}.py").write_text(SOURCE)
    return root


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT, signal.SIGKILL], ids=["TERM", "INT", "KILL"])
def test_workers_die_with_the_parent(big_tree, sig):
    env = {**os.environ, "PYTHONPATH": str(REPO), "MIGRATE_CACHE_DIR": str(big_tree / ".cache")}
    proc = subprocess.Popen(
        [sys.executable, "-m", "migrator", "scan", str(big_tree), "-j", "2", "--no-cache", "--format", "json"],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env,
    )
    workers: set[int] = set()
    try:
        assert _wait(lambda: len(_children(proc.pid)) >= 2 or proc.poll() is not None, 120)
        workers = _children(proc.pid)
        assert proc.poll() is None and workers, "the scan ended before its pool started"
        proc.send_signal(sig)
        proc.wait(timeout=60)
        assert _wait(lambda: not any(_alive(w) for w in workers), 30), [w for w in workers if _alive(w)]
        assert proc.returncode == {signal.SIGTERM: -signal.SIGTERM, signal.SIGINT: 130, signal.SIGKILL: -signal.SIGKILL}[sig]
        assert b"Traceback" not in proc.stderr.read()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        for w in workers:
            if _alive(w):
                os.kill(w, signal.SIGKILL)


# SIGTERM in the middle of building the pool: the workers are started, the pool object not yet returned
TERM_WHILE_BUILDING = """
import os, signal, sys, time
from migrator.engine import workers

start = workers._Pool._repopulate_pool

def repopulate(self):
    start(self)
    with open(sys.argv[1], "w") as out:
        out.write(" ".join(str(p.pid) for p in self._pool))
    os.kill(os.getpid(), signal.SIGTERM)
    time.sleep(0.5)  # where the signal used to land: inside Pool.__init__

workers._Pool._repopulate_pool = repopulate
with workers.worker_pool(2) as pool:
    print("pool built", flush=True)
    time.sleep(30)
"""


def test_sigterm_while_the_pool_is_built_still_ends_it_by_that_signal(tmp_path):
    pids_file = tmp_path / "workers"
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.run([sys.executable, "-c", TERM_WHILE_BUILDING, str(pids_file)], env=env,
                          capture_output=True, timeout=60)
    workers = [int(p) for p in pids_file.read_text().split()]
    assert len(workers) == 2
    assert proc.returncode == -signal.SIGTERM, proc.stderr.decode()
    assert b"Traceback" not in proc.stderr
    assert _wait(lambda: not any(_alive(w) for w in workers), 30), [w for w in workers if _alive(w)]
