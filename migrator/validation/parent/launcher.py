"""Start harness children and ``torch.distributed.run`` (parent side).

Every child is ``python -m migrator.validation.child.worker JOB.json`` in its own process group; a
timeout kills that group and the group of every process below it (torchrun's ranks run in sessions of
their own), with the determinism environment of
:mod:`.determinism`, the checkout's ``migrator`` on ``PYTHONPATH`` and no inherited
``RANK``/``WORLD_SIZE``. N ranks always go through torchrun (``python -m torch.distributed.run``);
on one node ``--standalone``, on a cluster the same command with ``--nnodes`` and a rendezvous
endpoint.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from typing import Generic, TypeVar

from .. import records
from ..records import Failure, Job, Status

WORKER = "migrator.validation.child.worker"  # the child side's entry point, run as a module
_DIST_ENV = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "GROUP_RANK", "ROLE_RANK", "MASTER_ADDR",
             "MASTER_PORT", "TORCHELASTIC_RUN_ID", "TORCHELASTIC_RESTART_COUNT", "TORCHELASTIC_MAX_RESTARTS")


def package_root() -> str:
    import migrator

    return os.path.dirname(os.path.dirname(os.path.abspath(migrator.__file__)))


def child_env(seed: int, threads: int, extra: dict[str, str] | None = None) -> dict[str, str]:
    from ..determinism import environment

    env = {k: v for k, v in os.environ.items() if k not in _DIST_ENV}
    env.update(environment(seed, threads))
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [package_root(), os.environ.get("PYTHONPATH")]))
    env["MIGRATE_VALIDATION_CHILD"] = "1"
    env["PYTHONUNBUFFERED"] = "1"
    env.pop("PYTHONSTARTUP", None)
    if extra:
        env.update(extra)
    return env


@dataclass
class Child:
    name: str
    proc: subprocess.Popen
    out: str
    log: str
    started: float
    ranks: int = 0
    timeout: float = 600.0

    def done(self) -> bool:
        return self.proc.poll() is not None


S = TypeVar("S", bound=Status)


@dataclass
class ChildResult(Generic[S]):
    name: str
    returncode: int | None
    seconds: float
    statuses: list[S]
    empty: S  # what `status` gives when the child left none
    log_tail: str = ""
    timed_out: bool = False
    expected: int = 1

    @property
    def status(self) -> S:
        return self.statuses[0] if self.statuses else self.empty

    @property
    def ok(self) -> bool:
        return len(self.statuses) >= self.expected and all(s.ok for s in self.statuses)

    def failure(self) -> Status | None:
        """The most telling failed status (a program failure beats a 'skipped' or harness one)."""
        bad = [s for s in self.statuses if not s.ok]
        if not bad:
            if self.timed_out:
                return Status(phase="harness", error=Failure(summary=f"timed out after {self.seconds:.0f} s"))
            if len(self.statuses) < self.expected:
                return Status(phase="harness", error=Failure(
                    summary=f"{self.expected - len(self.statuses)} of {self.expected} process(es) exited "
                            f"(code {self.returncode}) without a status; log: {self.log_tail[-600:]}"))
            return None
        rank = {"entry": 0, "run": 1, "harness": 2, "skipped": 3}
        return sorted(bad, key=lambda s: rank.get(s.phase or "harness", 2))[0]


def start(job: Job, name: str, env: dict[str, str], timeout: float = 600.0,
          module: str = WORKER) -> Child:
    """Start ``python -m MODULE JOB.json`` (the harness worker by default) for ``job`` (its ``out``
    folder gets the log)."""
    out = job.out
    os.makedirs(out, exist_ok=True)
    job_path = os.path.join(out, "job.json")
    records.write(job, job_path)
    log = os.path.join(out, "log.txt")
    with open(log, "wb") as fh:
        proc = subprocess.Popen([sys.executable, "-m", module, job_path], stdout=fh,
                                stderr=subprocess.STDOUT, env=env, cwd=out, start_new_session=True)
    return Child(name, proc, out, log, time.monotonic(), timeout=timeout)


def start_torchrun(job: Job, name: str, env: dict[str, str], nproc_per_node: int, *, nnodes: int = 1,
                   rdzv_endpoint: str | None = None, timeout: float = 600.0) -> Child:
    """N ranks of the worker through ``torch.distributed.run`` (the torchrun engine)."""
    out = job.out
    os.makedirs(out, exist_ok=True)
    job_path = os.path.join(out, "job.json")
    records.write(job, job_path)
    log = os.path.join(out, "log.txt")
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", str(nproc_per_node),
           "--nnodes", str(nnodes), "--max-restarts", "0", "--monitor-interval", "0.1"]
    if nnodes == 1 and not rdzv_endpoint:
        cmd.append("--standalone")
    else:
        cmd += ["--rdzv-backend", "c10d", "--rdzv-endpoint", rdzv_endpoint or "localhost:29400",
                "--rdzv-id", f"migrate-validate-{name}"]
    cmd += ["-m", WORKER, job_path]
    with open(log, "wb") as fh:
        proc = subprocess.Popen(cmd, stdout=fh, stderr=subprocess.STDOUT, env=env, cwd=out, start_new_session=True)
    return Child(name, proc, out, log, time.monotonic(), ranks=nproc_per_node * nnodes, timeout=timeout)


def _descendants(pid: int) -> list[int]:
    """Every process below ``pid``, read from ``/proc`` (empty where there is none)."""
    children: dict[int, list[int]] = {}
    try:
        entries = os.listdir("/proc")
    except OSError:
        return []
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as fh:
                stat = fh.read()
        except OSError:
            continue  # exited meanwhile
        fields = stat[stat.rindex(b")") + 2:].split()  # after "pid (comm) ": state, ppid, ...
        children.setdefault(int(fields[1]), []).append(int(entry))
    found, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def _kill(proc: subprocess.Popen) -> None:
    """SIGKILL the child's process group and the group of every process below it: torch's launcher
    starts each rank in a session of its own, so the launcher's group alone would orphan the ranks."""
    groups = {proc.pid}  # the group this launcher created for the child
    for pid in _descendants(proc.pid):
        try:
            groups.add(os.getpgid(pid))
        except (ProcessLookupError, PermissionError):
            pass
    groups.discard(os.getpgrp())  # never our own
    for group in groups:
        try:
            os.killpg(group, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:  # pragma: no cover
        pass


def wait(child: Child, status_type: type[S]) -> ChildResult[S]:
    """Wait for ``child`` (killing its process group on timeout) and read its status record(s); a status
    file that does not match ``status_type`` counts as a harness failure naming the file and field."""
    timed_out = False
    remaining = child.timeout - (time.monotonic() - child.started)
    try:
        child.proc.wait(timeout=max(remaining, 0.1))
    except subprocess.TimeoutExpired:
        timed_out = True
        _kill(child.proc)
    seconds = time.monotonic() - child.started
    statuses: list[S] = []
    names = ["status.json"] if not child.ranks else [f"status_rank{r}.json" for r in range(child.ranks)]
    for n in names:
        path = os.path.join(child.out, n)
        if os.path.exists(path):
            try:
                statuses.append(records.read_status(path, status_type))
            except (OSError, records.RecordError) as exc:
                statuses.append(status_type(phase="harness", error=Failure(summary=str(exc))))
    tail = ""
    try:
        with open(child.log, "rb") as fh:
            fh.seek(0, os.SEEK_END)
            fh.seek(max(fh.tell() - 4000, 0))
            tail = fh.read().decode("utf-8", "replace")
    except OSError:
        pass
    return ChildResult(child.name, child.proc.returncode, seconds, statuses, status_type(), tail, timed_out,
                       max(child.ranks, 1))


def kill(child: Child) -> None:
    if not child.done():
        _kill(child.proc)
