"""A program we run forks, starts `setsid` daemons and ignores SIGTERM: nothing it started outlives the
scope, by any ending (pass, fail, timeout, SIGTERM or Ctrl-C to the process running it), and a memory
limit is a clear verdict."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from migrator.ground import process_scope

REPO = Path(__file__).resolve().parents[2]

if not os.path.isdir("/proc"):  # pragma: no cover
    pytest.skip("needs /proc", allow_module_level=True)

# writes the pids of a SIGTERM-ignoring grandchild, a setsid daemon and a double-forked (re-parented)
# daemon to PIDS, then passes, fails or hangs
FORKER = textwrap.dedent(r'''
    import os, signal, subprocess, sys, time
    pids, mode = sys.argv[1], sys.argv[2]
    sleeper = [sys.executable, "-c",
               "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(600)"]
    grand = subprocess.Popen(sleeper)
    daemon = subprocess.Popen(sleeper, start_new_session=True)
    mid = subprocess.Popen([sys.executable, "-c",
                            "import subprocess, sys; print(subprocess.Popen(sys.argv[1:], start_new_session=True, stdout=subprocess.DEVNULL).pid)"]
                           + sleeper, stdout=subprocess.PIPE)
    orphan = int(mid.communicate()[0])
    with open(pids + ".tmp", "w") as fh:
        fh.write(" ".join(map(str, [grand.pid, daemon.pid, orphan])))
    os.rename(pids + ".tmp", pids)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    if mode == "fail":
        sys.exit(3)
    if mode == "hang":
        time.sleep(600)
''')

# the process that runs the program, standing in for `migrate`: SIGTERM or Ctrl-C ends it
DRIVER = textwrap.dedent('''
    import sys
    from migrator.ground.process_scope import Scope
    scope = Scope([sys.executable] + sys.argv[1:], env=dict(__import__("os").environ), cwd=".", stdout=None)
    scope.wait(None)
''')


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            fh.read()
        return True
    except OSError:
        return False


def _wait_for(path: Path, seconds: float = 20.0) -> list[int]:
    deadline = time.monotonic() + seconds
    while not path.exists():
        assert time.monotonic() < deadline, "the forking program never wrote its pids"
        time.sleep(0.02)
    return [int(p) for p in path.read_text().split()]


def _left(pids: list[int], grace: float = 5.0) -> list[int]:
    deadline = time.monotonic() + grace
    while any(_alive(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    return [p for p in pids if _alive(p)]


@pytest.fixture
def forker(tmp_path):
    script = tmp_path / "forker.py"
    script.write_text(FORKER)
    return script


@pytest.mark.parametrize("mode", ["pass", "fail"])
def test_nothing_outlives_a_program_that_exits(tmp_path, forker, mode):
    pids_file = tmp_path / "pids"
    scope = process_scope.Scope([sys.executable, str(forker), str(pids_file), mode], env=dict(os.environ),
                                cwd=str(tmp_path), stdout=subprocess.DEVNULL)
    assert scope.wait(60)
    pids = _wait_for(pids_file)
    assert all(_alive(p) for p in pids), "the program's processes should still run before the scope ends"
    assert scope.end() >= 3
    assert scope.proc.returncode == (0 if mode == "pass" else 3)
    assert _left(pids) == []


def test_nothing_outlives_a_program_that_times_out(tmp_path, forker):
    pids_file = tmp_path / "pids"
    scope = process_scope.Scope([sys.executable, str(forker), str(pids_file), "hang"], env=dict(os.environ),
                                cwd=str(tmp_path), stdout=subprocess.DEVNULL)
    pids = _wait_for(pids_file)
    assert not scope.wait(0.2)
    scope.end()
    assert _left([scope.pid, *pids]) == []


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_nothing_outlives_the_runner_stopped_by_a_signal(tmp_path, forker, signum):
    pids_file = tmp_path / "pids"
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    driver = subprocess.Popen([sys.executable, "-c", DRIVER, str(forker), str(pids_file), "hang"], cwd=tmp_path,
                              env=env, stderr=subprocess.PIPE)
    pids = _wait_for(pids_file)
    driver.send_signal(signum)
    _, err = driver.communicate(timeout=30)
    assert driver.returncode != 0
    assert _left(pids) == [], err.decode()


# The limit is set on the started child (prlimit, no preexec_fn), so a child that allocates in its first
# milliseconds on a loaded machine can beat it; real programs import torch first. This one waits for it.
ALLOCATE_ONCE_LIMITED = """
import resource, time
deadline = time.monotonic() + 30
while resource.getrlimit(resource.RLIMIT_DATA)[0] == resource.RLIM_INFINITY and time.monotonic() < deadline:
    time.sleep(0.01)
bytearray(1 << 30)
"""


def test_a_child_over_its_memory_limit_gets_a_clear_verdict(tmp_path):
    log = tmp_path / "log"
    with open(log, "wb") as fh:
        scope = process_scope.Scope([sys.executable, "-c", ALLOCATE_ONCE_LIMITED], env=dict(os.environ),
                                    cwd=str(tmp_path), stdout=fh, memory=256 << 20)
    assert scope.wait(60)
    scope.end()
    assert scope.proc.returncode != 0
    verdict = process_scope.hit_memory_limit(log.read_text(), scope.memory)
    assert verdict and "0.2 GiB" in verdict and process_scope.MEMORY_ENV in verdict


def test_memory_limit_setting(monkeypatch):
    monkeypatch.setenv(process_scope.MEMORY_ENV, "512M")
    assert process_scope.memory_limit() == 512 << 20
    monkeypatch.setenv(process_scope.MEMORY_ENV, "none")
    assert process_scope.memory_limit() is None
    monkeypatch.setenv(process_scope.MEMORY_ENV, "lots")
    with pytest.raises(ValueError, match=process_scope.MEMORY_ENV):
        process_scope.memory_limit()


@pytest.mark.skipif(not os.path.isdir("/proc"), reason="reads /proc")
def test_the_process_table_reads_pid_parent_session_and_state_even_past_an_odd_command_name(tmp_path):
    """A command name may hold spaces and ``)`` (``/proc/N/stat`` puts it in parentheses): the fields after the
    last ``)`` are read, for this process and for a child with such a name."""
    odd = tmp_path / "a b) c"
    odd.symlink_to(sys.executable)
    child = subprocess.Popen([str(odd), "-c", "import time; time.sleep(30)"], start_new_session=True)
    try:
        deadline = time.monotonic() + 10
        while True:
            rows = {pid: (ppid, sid, state) for pid, ppid, sid, state in process_scope._processes()}
            with open(f"/proc/{child.pid}/stat", "rb") as fh:
                named = b"a b) c" in fh.read()
            if named or time.monotonic() > deadline:
                break
            time.sleep(0.05)
        assert named
        assert rows[os.getpid()][:2] == (os.getppid(), os.getsid(0)) and rows[os.getpid()][2] in "RS"
        assert rows[child.pid][:2] == (os.getpid(), child.pid) and rows[child.pid][2] in "RSD"
    finally:
        child.kill()
        child.wait()
