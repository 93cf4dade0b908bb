"""Warm starts (migrator/validation/child/{warm,zygote}.py): children fork from a zygote that imported torch once.

The verdicts must not depend on it (a warm and a cold run of the same sample give the same result), the
children must really start warm where they can (else the process-safety tests elsewhere, which run warm by
default, would prove nothing about it), a client the zygote cannot serve exactly runs cold, and no
process outlives the run: a killed client takes its worker along, a dead parent takes the zygote.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from migrator.validation import warm_contract as warm
from migrator.validation.child.zygote import env_difference
from migrator.validation.parent import launcher

REPO = Path(__file__).resolve().parents[2]
NOTE = warm.STARTED_NOTE.split(" (")[0]


def _logs_with_note(work: Path) -> dict[str, bool]:
    return {str(p.parent.relative_to(work)): NOTE in p.read_text(errors="replace") for p in work.rglob("log.txt")}


def _stable(doc: object) -> object:
    """The result without what differs between any two runs (times, temporary paths)."""
    if isinstance(doc, dict):
        return {k: _stable(v) for k, v in doc.items()
                if "seconds" not in k and k not in ("timings", "notes", "migrated", "work_dir", "markdown")}
    if isinstance(doc, list):
        return [_stable(v) for v in doc]
    return doc


@pytest.mark.slow
def test_a_warm_run_gives_the_cold_runs_result_and_every_child_starts_warm(tmp_path, monkeypatch, migrated_gpt):
    """samples/gpt against its `migrate fix` output, shared with the other validate tests: the runs' own
    migrate step runs in this process, never in a child, so it has nothing to show about warm starts."""
    pytest.importorskip("torch")
    from migrator import api

    docs, notes = {}, {}
    for mode in ("1", "0"):
        if mode == "1":  # warm by default: the children fork off the zygote this process's validate runs share
            monkeypatch.delenv(warm.SWITCH_ENV, raising=False)
        else:
            monkeypatch.setenv(warm.SWITCH_ENV, mode)
        work = tmp_path / f"work{mode}"
        result = api.validate(REPO / "samples" / "gpt", migrated=str(migrated_gpt), stages=("S1", "S2"),
                              work_dir=str(work))
        assert result.exit_code == 0, result.text()
        docs[mode] = json.loads(json.dumps(result.to_json(), default=str))
        notes[mode] = _logs_with_note(work)
    assert notes["1"] and all(notes["1"].values()), notes["1"]  # both S1 sides and the S2 ranks
    s2_log = (tmp_path / "work1" / "s2" / "log.txt").read_text(errors="replace")
    assert s2_log.count(NOTE) == 3, s2_log[-3000:]  # torchrun's agent and both its ranks forked
    assert not any(notes["0"].values()), notes["0"]
    assert _stable(docs["1"]) == _stable(docs["0"])


def test_only_the_keys_torchrun_and_the_scope_set_per_child_may_differ():
    base = {"PATH": "/bin", "PYTHONHASHSEED": "0", "OMP_NUM_THREADS": "1"}
    per_rank = {**base, "RANK": "1", "LOCAL_RANK": "1", "WORLD_SIZE": "2", "TORCHELASTIC_RUN_ID": "x",
                "MASTER_PORT": "29500", "MIGRATE_PROCESS_SCOPE": "token"}
    assert env_difference(base, per_rank) == []
    assert env_difference(base, {**base, "PYTHONHASHSEED": "1"}) == ["PYTHONHASHSEED"]
    assert env_difference(base, {**base, "LD_PRELOAD": "x.so"}) == ["LD_PRELOAD"]
    assert env_difference(base, {"PATH": "/bin", "PYTHONHASHSEED": "0"}) == ["OMP_NUM_THREADS"]
    # the parent keys its zygotes the same way: a census's single-rank env (its own MASTER_PORT) shares one
    assert warm.zygote_key(per_rank) == warm.zygote_key(base) != warm.zygote_key({**base, "PYTHONHASHSEED": "1"})


def test_a_multi_node_launch_forks_off_the_runs_zygote():
    """What a multi-node launch adds for its torchrun (through the node guard, which drops its own key) is
    read when torchrun rendezvouses: its agent and ranks fork off the zygote of the run's environment."""
    from migrator.validation.parent.multinode.lead import guarded

    base = launcher.child_env(0, 1)
    _, env = guarded(["worker"], base)
    agent = {k: v for k, v in env.items() if k != "MIGRATE_GUARD_PARENT"}
    assert agent != base and env_difference(base, agent) == []
    assert warm.zygote_key(agent) == warm.zygote_key(base)


def _client(job: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """The worker as the launcher starts it, on a job file that does not exist (it fails fast, with a status)."""
    return subprocess.run([sys.executable, "-m", launcher.WORKER, str(job)], env=env, cwd=job.parent,
                          capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("module", [m for m in launcher.WARM_MODULES if m != launcher.WORKER])
def test_the_other_child_programs_are_served_warm_and_run_their_own_main(module, tmp_path):
    """The census child (`migrate ops --trace`) and the kernel check's child inside a warm block: they fork
    too, and the fork runs that program's main, not the validation worker's."""
    pytest.importorskip("torch")
    env = launcher.child_env(0, 1)
    job = tmp_path / "job.json"
    job.write_text('{"kind": "census"}')  # the census's kind without its fields; no kernel job either
    with launcher.warm_starts(env):
        done = subprocess.run([sys.executable, "-m", module, str(job), str(tmp_path / "result.json")],
                              env=launcher.worker_env(env, module), cwd=tmp_path, capture_output=True, text=True,
                              timeout=120)
    assert done.returncode == 1, done.stderr
    assert NOTE in done.stderr, done.stderr
    if module == "migrator.census.child":
        summary = json.loads((tmp_path / "status.json").read_text())["error"]["summary"]
        assert "job.json" in summary and "unknown job kind" not in summary, summary
    else:  # the kernel runner reads its job itself: the missing field is its KeyError
        assert "KeyError: 'workdir'" in done.stderr and not (tmp_path / "status.json").exists(), done.stderr


def test_a_client_is_served_warm_and_one_the_zygote_cannot_serve_runs_cold(tmp_path):
    pytest.importorskip("torch")
    env = launcher.child_env(0, 1)
    with launcher.warm_starts(env):
        served = launcher.worker_env(env)
        assert warm.SOCKET_ENV in served, "the zygote did not start"
        for name, client_env, warm_expected in (("warm", served, True),
                                                ("cold", {**served, "PYTHONHASHSEED": "7"}, False)):
            folder = tmp_path / name
            folder.mkdir()
            done = _client(folder / "missing.json", client_env)
            assert done.returncode == 1, done.stderr
            status = json.loads((folder / "status.json").read_text())
            assert status["phase"] == "harness" and "missing.json" in status["error"]["summary"]
            assert (NOTE in done.stderr) is warm_expected, done.stderr


@pytest.mark.parametrize("deep", [False, True])
def test_the_zygote_socket_binds_whatever_the_temporary_folder(tmp_path, monkeypatch, deep):
    """A deep TMPDIR (a test's, a CI workspace's) made every zygote fail to bind its socket (AF_UNIX paths are
    short) and every child start cold: the socket folder moves where a socket fits, and stays where one does."""
    import shutil
    import socket
    import tempfile

    base = tmp_path.joinpath(*["a-rather-long-folder-name"] * 6) if deep else Path(tempfile.mkdtemp(dir="/tmp"))
    base.mkdir(parents=True, exist_ok=True)
    monkeypatch.setattr(tempfile, "tempdir", str(base))
    folder = launcher.socket_folder()
    try:
        assert (Path(folder).parent == base) == (not deep)
        assert os.stat(folder).st_mode & 0o777 == 0o700
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as listener:
            listener.bind(os.path.join(folder, "zygote0.sock"))
    finally:
        shutil.rmtree(folder)
        if not deep:
            shutil.rmtree(base)


def test_warm_starts_off_by_the_switch(monkeypatch):
    monkeypatch.setenv(warm.SWITCH_ENV, "0")
    env = launcher.child_env(0, 1)
    with launcher.warm_starts(env):
        assert warm.SOCKET_ENV not in launcher.worker_env(env)


HOLDER = """
import os, sys, time
from migrator.validation.parent import launcher
env = launcher.child_env(0, 1)
with launcher.warm_starts(env):
    launcher.worker_env(env)
    print(launcher.zygote_pids()[0], flush=True)
    time.sleep(600)
"""


def test_the_zygote_exits_when_its_validate_run_is_killed(tmp_path):
    pytest.importorskip("torch")
    env = {**os.environ, "PYTHONPATH": str(REPO), "TMPDIR": str(tmp_path)}  # its zygote folder outlives a SIGKILL
    holder = subprocess.Popen([sys.executable, "-c", HOLDER], env=env, cwd=tmp_path, stdout=subprocess.PIPE,
                              text=True)
    try:
        assert holder.stdout is not None
        zygote = int(holder.stdout.readline())
        assert os.path.exists(f"/proc/{zygote}")
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait(30)
    deadline = time.monotonic() + 30
    while _running(zygote) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _running(zygote)


def _running(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            stat = fh.read()
    except OSError:
        return False
    return stat[stat.rindex(b")") + 2:].split()[0] != b"Z"


SHARED = """
import json, os, signal, time
from migrator.validation.parent import launcher

def run(*envs):
    with launcher.warm_starts(envs[0]):  # one validate run, inside the longer-lived block
        for env in envs:
            launcher.worker_env(env)
        return sorted(launcher.zygote_pids())

a, b = launcher.child_env(0, 1), launcher.child_env(1, 1)
with launcher.warm_starts(keep=1):
    first = run(a)
    again = run(a)
    both = run(a, b)
    after = sorted(launcher.zygote_pids())
    os.kill(after[0], signal.SIGKILL)
    while not open(f"/proc/{after[0]}/stat").read().rsplit(")", 1)[1].startswith(" Z"):  # until a zombie
        time.sleep(0.05)
    renewed = run(b)
    print(json.dumps({"first": first, "again": again, "both": both, "after": after, "renewed": renewed}))
    left = renewed
print(json.dumps({"left": [p for p in left if os.path.exists(f"/proc/{p}/cmdline")
                           and open(f"/proc/{p}/cmdline").read()]}))
"""


@pytest.mark.slow
def test_a_longer_lived_block_keeps_zygotes_across_runs_within_its_bound(tmp_path):
    """Runs inside one block share a zygote per environment; a run may use more than ``keep``, and
    when it ends the least recently used idle ones go; one that died between runs is started anew;
    the block's end ends the rest."""
    pytest.importorskip("torch")
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run([sys.executable, "-c", SHARED], env=env, cwd=tmp_path, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr
    seen, end = (json.loads(line) for line in done.stdout.splitlines())
    assert len(seen["first"]) == 1 and seen["again"] == seen["first"]  # the second run reused it
    assert len(seen["both"]) == 2 and seen["first"][0] in seen["both"]  # past keep while the run uses both
    assert len(seen["after"]) == 1 and seen["after"][0] not in seen["first"]  # a's, least recently used, ended
    assert len(seen["renewed"]) == 1 and seen["renewed"] != seen["after"]  # b's died: a new one
    assert end["left"] == []


def test_a_child_exit_runs_the_programs_finalizers_but_skips_torch_librarys_teardown():
    """``worker.finish`` drops only ``torch.library``'s exit-time finalizers (inductor registers ~170, ~50 ms
    per child): the program's own finalizers and ``atexit`` handlers still run, in a zygote's fork as cold."""
    code = """
import atexit, weakref, torch, torch._inductor
from migrator.validation.child import worker
class Held: pass
held = Held()
weakref.finalize(held, print, "program finalizer ran")
atexit.register(print, "program atexit ran")
library = torch.library.Library("migrate_exit_test", "DEF")
finalizers = list(weakref.finalize._registry)
ours = [f for f in finalizers if f.peek()[1].__module__ == "torch.library"]
worker._skip_library_teardown()
print("library finalizers", len(ours), "still at exit", sum(f.atexit for f in ours))
print("others still at exit", sum(f.atexit for f in finalizers if f not in ours), "of", len(finalizers) - len(ours))
worker.finish(7)
"""
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(REPO)})
    assert proc.returncode == 7, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0].startswith("library finalizers ") and int(lines[0].split()[2]) > 100, lines
    assert lines[0].endswith("still at exit 0") and lines[1] == "others still at exit 1 of 1", lines
    assert set(lines[2:]) == {"program finalizer ran", "program atexit ran"}, lines


def test_the_torchrun_agent_names_rendezvous_methods_as_torch_does():
    """``run_torchrun`` replaces torch's ``inspect.stack()`` naming of rendezvous records with a frame look-up:
    the same name at every depth, and the same answer past the stack's end."""
    code = """
from torch.distributed.elastic.rendezvous import dynamic_rendezvous as rdzv
from migrator.validation.child import worker
original = rdzv.get_method_name
def names(get):
    def inner(depth):
        return get(depth)
    def outer(depth):
        return inner(depth)
    return [outer(d) for d in (0, 1, 2, 3, 4, 50)]
before = names(original)
worker._name_methods_from_frames()
assert rdzv.get_method_name is not original
print(before == names(rdzv.get_method_name), before)
"""
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(REPO)})
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("True ['get_method_name', 'inner', 'outer', '<listcomp>', 'names'"), proc.stdout
    assert proc.stdout.rstrip().endswith("'no_method_name']"), proc.stdout


def test_the_zygote_preloads_the_harness_without_installing_anything():
    """The zygote imports the harness's child modules and builds the record converter before it forks, and
    nothing more: no layer installed, no ``torch_npu``, no bench module, no thread, forking still safe."""
    code = """
import sys, threading
from migrator.validation.child import npu_emulation, zygote
print(zygote._preload())
from migrator.validation import records
print(records._converter is not None, "migrator.validation.child.side" in sys.modules)
print("torch_npu" in sys.modules, npu_emulation.is_installed(), hasattr(__import__("torch"), "npu"))
print(sorted(m for m in sys.modules if m.startswith(("migrator.validation.child.bench", "migrator.validation.child.flops"))))
print(threading.active_count())
"""
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(REPO)})
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == ["None", "True True", "False False False", "[]", "1"], proc.stdout
