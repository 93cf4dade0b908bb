"""Start harness children and ``torch.distributed.run`` (parent side).

Every child is ``python -m migrator.validation.child.worker JOB.json`` in a
:class:`migrator.ground.process_scope.Scope` (its own session, a memory limit, every process it or torchrun's
ranks start ended with it on exit, timeout, Ctrl-C or SIGTERM), with the determinism environment of
:mod:`.determinism`, the checkout's ``migrator`` on ``PYTHONPATH`` and no inherited
``RANK``/``WORLD_SIZE``. N ranks always go through torchrun's agent (``torch.distributed.run``, started as
``worker --torchrun ARGS``); on one node ``--standalone``, on a cluster the same command with ``--nnodes`` and
a rendezvous endpoint. Inside :func:`warm_starts` (a validate run) worker children and torchrun's agents fork
from a zygote that imported torch once (:mod:`migrator.validation.child.zygote`).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from migrator.ground import process_scope

from .. import records
from ..records import Failure, Job, Status
from .capped_log import CappedLog

WORKER = "migrator.validation.child.worker"  # the child side's entry point, run as a module
ZYGOTE = "migrator.validation.child.zygote"  # the warm-start fork server
# child programs a zygote forks (each delegates to it): the worker, the census, the kernel check
WARM_MODULES = (WORKER, "migrator.census.child", "migrator.validation.child.kernel_run")
ZYGOTE_READY_TIMEOUT = 60.0  # importing torch on a loaded machine; past it the children start cold
_NOT_INHERITED = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "GROUP_RANK", "ROLE_RANK", "MASTER_ADDR",
                  "MASTER_PORT", "TORCHELASTIC_RUN_ID", "TORCHELASTIC_RESTART_COUNT", "TORCHELASTIC_MAX_RESTARTS",
                  # the parent's own pytest test (set anew for each): nothing the child runs, and it would
                  # give every test's children an environment of their own (no zygote shared between them)
                  "PYTEST_CURRENT_TEST")


def package_root() -> str:
    import migrator

    return os.path.dirname(os.path.dirname(os.path.abspath(migrator.__file__)))


# `--clean-env`: what a child still gets from our environment (the program runs with the user's rights either
# way; this only keeps tokens and keys out of it). Determinism variables are set anew by `child_env`.
CLEAN_ENV_NAMES = frozenset({"PATH", "HOME", "USER", "LOGNAME", "SHELL", "TERM", "TZ", "LANG", "LANGUAGE", "TMPDIR",
                             "TMP", "TEMP", "LD_LIBRARY_PATH", "VIRTUAL_ENV", "CONDA_PREFIX"})
CLEAN_ENV_PREFIXES = ("LC_", "PYTHON", "MIGRATE_", "CUDA_", "NVIDIA_", "ASCEND_", "HCCL_", "NPU_", "TORCH_", "OMP_",
                      "MKL_", "CUBLAS_")
_passed: frozenset[str] | None = None  # None: the whole environment is inherited (the default)


@contextmanager
def clean_environment(passed: Iterable[str] = ()) -> Iterator[None]:
    """Inside: children get only the allow-list above plus the names in `passed` (`--env NAME`)."""
    global _passed
    before, _passed = _passed, frozenset(passed)
    try:
        yield
    finally:
        _passed = before


def _inherited(name: str) -> bool:
    if name in _NOT_INHERITED:
        return False
    if _passed is None:
        return True
    return name in CLEAN_ENV_NAMES or name in _passed or name.startswith(CLEAN_ENV_PREFIXES)


def child_env(seed: int, threads: int, extra: dict[str, str] | None = None) -> dict[str, str]:
    from ..determinism import environment

    env = {k: v for k, v in os.environ.items() if _inherited(k)}
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
    scope: process_scope.Scope
    out: str
    log: str
    started: float
    ranks: int = 0
    timeout: float = 600.0
    launch: int | None = None  # node 0 of a multi-node run: which announced launch (its shards come back)
    sink: CappedLog | None = None  # the log's copier: its tail is on disk once closed

    def done(self) -> bool:
        return self.scope.proc.poll() is not None


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
    memory_limit: int | None = None

    @property
    def status(self) -> S:
        return self.statuses[0] if self.statuses else self.empty

    @property
    def ok(self) -> bool:
        return (len(self.statuses) >= self.expected and all(s.ok for s in self.statuses)
                and not any(s.provenance is not None and s.provenance.foreign for s in self.statuses))

    def failure(self) -> Status | None:
        """The most telling failed status (a program failure beats a 'skipped' or harness one)."""
        refused = next((why for s in self.statuses if s.provenance is not None
                        and (why := s.provenance.refusal(s.side or "migrated")) is not None), None)
        if refused:  # a run that imported the other side's code proves nothing: exit 2, whatever it computed
            return Status(phase="entry", error=Failure(summary=refused))
        bad = [s for s in self.statuses if not s.ok]
        memory = process_scope.hit_memory_limit(self.log_tail, self.memory_limit) if not self.ok else None
        if memory:
            return Status(phase="run", error=Failure(summary=memory))
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


EnvKey = frozenset[tuple[str, str]]


@dataclass
class _Zygote:
    """One child environment's fork server and whether it answered ready (None: not asked yet)."""

    path: str
    scope: process_scope.Scope
    answered: bool | None = None

    def socket(self) -> str | None:
        """Its socket once it is ready; None when it failed, found forking unsafe or was too slow."""
        if self.answered is None:
            self.answered = self._ready()
            if not self.answered:
                self.end()  # cold starts, as without it
        return self.path if self.answered else None

    def alive(self) -> bool:
        return self.answered is not False and self.scope.proc.poll() is None

    def died(self) -> bool:
        return self.answered is True and self.scope.proc.poll() is not None

    def _ready(self) -> bool:
        import select

        from .. import warm_contract as warm

        pipe = self.scope.proc.stdout
        assert pipe is not None
        answered, _, _ = select.select([pipe], [], [], ZYGOTE_READY_TIMEOUT)
        return bool(answered) and pipe.read(len(warm.READY)) == warm.READY

    def end(self) -> None:
        self.scope.end()
        if self.scope.proc.stdout is not None:
            self.scope.proc.stdout.close()


# the longest Unix socket path that binds everywhere we run (Linux allows 107 bytes, macOS 103), with room for
# the zygote's own name (`zygoteN.sock`)
SOCKET_PATH_MAX = 100


def socket_folder() -> str:
    """A new private folder for the zygotes' sockets, in the temporary folder unless its path is too long for a
    socket there (a deep `TMPDIR`, a test's or a CI workspace's: every zygote would fail to bind, and every child
    start cold); then under /tmp or /var/tmp (made 0700 like any `mkdtemp`)."""
    folder = tempfile.mkdtemp(prefix="migrate-warm-")
    if _fits(folder):
        return folder
    for base in ("/tmp", "/var/tmp"):
        try:
            short = tempfile.mkdtemp(prefix="migrate-warm-", dir=base)
        except OSError:
            continue
        if _fits(short):
            os.rmdir(folder)
            return short
        os.rmdir(short)
    return folder  # nowhere shorter: the zygotes fail to bind, and the children start cold


def _fits(folder: str) -> bool:
    return len(os.path.join(folder, "zygote0000.sock").encode()) <= SOCKET_PATH_MAX


@dataclass
class _WarmStarts:
    """The zygotes of a :func:`warm_starts` block, one per child environment, least recently used first.
    ``keep`` bounds how many stay (an idle zygote holds torch's memory); none that a block still open
    (the validate run in progress) has used is ended for it."""

    keep: int | None = None
    folder: str = field(default_factory=lambda: socket_folder())
    zygotes: dict[EnvKey, _Zygote] = field(default_factory=dict)
    in_use: set[EnvKey] = field(default_factory=set)  # by the nested blocks open (the runs in progress)
    runs: int = 0
    started: int = 0

    def prepare(self, env: dict[str, str]) -> None:
        """Start the zygote for ``env`` now, without waiting for it (it imports torch meanwhile)."""
        from .. import warm_contract as warm

        key = warm.zygote_key(env)
        if self.runs:
            self.in_use.add(key)
        if not warm.enabled(env):
            return
        known = self.zygotes.pop(key, None)
        if known is not None and not known.died():
            self.zygotes[key] = known  # the most recently used, last (one that could not serve stays cold)
            return
        if known is not None:  # it served, then died between runs: a new one
            known.end()
        path = os.path.join(self.folder, f"zygote{self.started}.sock")
        with open(os.path.join(self.folder, f"zygote{self.started}.log"), "wb") as log:
            shared = {k: v for k, v in env.items() if not warm.per_child(k)}  # a rank's keys are its clients'
            scope = process_scope.Scope([sys.executable, "-m", ZYGOTE, path], env=shared, cwd=self.folder,
                                        stdout=subprocess.PIPE, stderr=log, memory=process_scope.memory_limit())
        self.started += 1
        self.zygotes[key] = _Zygote(path, scope)
        self.trim()

    def trim(self) -> None:
        """End the least recently used zygotes past ``keep`` that no open run uses."""
        idle = [k for k in self.zygotes if k not in self.in_use]
        while self.keep is not None and len(self.zygotes) > self.keep and idle:
            self.zygotes.pop(idle.pop(0)).end()

    def attach(self, env: dict[str, str]) -> dict[str, str]:
        """``env`` for a worker child: pointing at this environment's zygote once it is ready."""
        from .. import warm_contract as warm

        if not warm.enabled(env):
            return env
        self.prepare(env)
        path = self.zygotes[warm.zygote_key(env)].socket()
        if path is None:
            return env
        limit = process_scope.memory_limit()
        return {**env, warm.SOCKET_ENV: path, **({warm.MEMORY_ENV: str(limit)} if limit else {})}

    def end(self) -> None:
        for zygote in self.zygotes.values():
            zygote.end()
        self.zygotes.clear()
        shutil.rmtree(self.folder, ignore_errors=True)


_warm: _WarmStarts | None = None


@contextmanager
def warm_starts(env: dict[str, str] | None = None, *, keep: int | None = None) -> Iterator[None]:
    """Worker children started inside fork from a zygote that imported torch once (the one for ``env``
    starts at once). The outermost block owns the zygotes and ends them with it: a validate run opens
    one; a process running many (a test session, a service) may open one around them all, keeping at most
    ``keep`` environments' zygotes between runs."""
    global _warm
    if _warm is not None:  # nested: one validate run inside a longer-lived block
        outer, in_use = _warm, set(_warm.in_use)
        outer.runs += 1
        try:
            if env is not None:
                outer.prepare(env)
            yield
        finally:
            outer.runs -= 1
            outer.in_use = in_use
            outer.trim()
        return
    _warm = _WarmStarts(keep=keep)
    try:
        if env is not None:
            _warm.prepare(env)
        yield
    finally:
        starts, _warm = _warm, None
        starts.end()


def worker_env(env: dict[str, str], module: str = WORKER) -> dict[str, str]:
    """``env`` for a worker child (or another of :data:`WARM_MODULES`): inside :func:`warm_starts`, pointing at
    its zygote when one runs."""
    return _warm.attach(env) if _warm is not None and module in WARM_MODULES else env


def zygote_pids() -> list[int]:
    """The live zygotes of the open :func:`warm_starts` block (diagnostics and tests)."""
    return [z.scope.pid for z in _warm.zygotes.values() if z.alive()] if _warm is not None else []


def start(job: Job, name: str, env: dict[str, str], timeout: float = 600.0,
          module: str = WORKER) -> Child:
    """Start ``python -m MODULE JOB.json`` (the harness worker by default) for ``job`` (its ``out``
    folder gets the log)."""
    out = job.out
    os.makedirs(out, exist_ok=True)
    job_path = os.path.join(out, "job.json")
    records.write(job, job_path)
    log = os.path.join(out, "log.txt")
    started = time.monotonic()  # a wait for the zygote counts as this child's start
    env = worker_env(env, module)
    sink = CappedLog(log)
    try:
        scope = process_scope.Scope([sys.executable, "-m", module, job_path], env=env, cwd=out, stdout=sink.fd,
                                    memory=process_scope.memory_limit())
    finally:
        sink.started()
    return Child(name, scope, out, log, started, timeout=timeout, sink=sink)


def start_torchrun(job: Job, name: str, env: dict[str, str], nproc_per_node: int, *, nnodes: int = 1,
                   rdzv_endpoint: str | None = None, timeout: float = 600.0, rdzv_id: str | None = None) -> Child:
    """N ranks of the worker through ``torch.distributed.run`` (the torchrun engine). Across nodes, node 0
    announces the launch to the others (:mod:`.multinode`), which pass its ``rdzv_id``."""
    out = job.out
    os.makedirs(out, exist_ok=True)
    job_path = os.path.join(out, "job.json")
    records.write(job, job_path)
    log = os.path.join(out, "log.txt")
    # torchrun's agent through the worker (`--torchrun`): forked from the zygote like the ranks, when it runs
    cmd = [sys.executable, "-m", WORKER, "--torchrun", "--nproc-per-node", str(nproc_per_node),
           "--nnodes", str(nnodes), "--max-restarts", "0", "--monitor-interval", "0.1"]
    launch = None
    if nnodes == 1 and not rdzv_endpoint:
        cmd.append("--standalone")
    else:
        if nnodes > 1:
            from .multinode import lead as multinode

            leader = multinode.current()
            if leader is not None and rdzv_id is None:
                launch, rdzv_id = leader.announce(records.to_json(job), name, nproc_per_node, timeout)
        cmd += ["--rdzv-backend", "c10d", "--rdzv-endpoint", rdzv_endpoint or "localhost:29400",
                "--rdzv-id", rdzv_id or f"migrate-validate-{name}"]
    cmd += ["-m", WORKER, job_path]
    started = time.monotonic()
    env = worker_env(env)
    if nnodes > 1:
        from .multinode.lead import guarded

        cmd, env = guarded(cmd, env)
    sink = CappedLog(log)
    try:
        scope = process_scope.Scope(cmd, env=env, cwd=out, stdout=sink.fd, memory=process_scope.memory_limit())
    finally:
        sink.started()
    return Child(name, scope, out, log, started, ranks=nproc_per_node * nnodes, timeout=timeout, launch=launch,
                 sink=sink)


def wait(child: Child, status_type: type[S]) -> ChildResult[S]:
    """Wait for ``child`` and end its scope (every process it started, on exit or timeout); read its status
    record(s): a status file that does not match ``status_type`` counts as a harness failure naming the
    file and field."""
    remaining = child.timeout - (time.monotonic() - child.started)
    leader = _leader_of(child)
    try:
        if leader is not None:  # also stops waiting when another node is lost
            timed_out = not leader.wait(child.scope, max(remaining, 0.1))
        else:
            timed_out = not child.scope.wait(max(remaining, 0.1))
    finally:
        child.scope.end()
        if child.sink is not None:
            child.sink.close()
    lost = leader.gather(child.launch, child.out) if leader is not None and child.launch is not None else None
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
    if lost is not None:  # another node's records are missing: nothing to compare; say which node
        statuses = [status_type(phase="harness", error=Failure(summary=lost))]
    tail = ""
    try:
        with open(child.log, "rb") as fh:
            fh.seek(0, os.SEEK_END)
            fh.seek(max(fh.tell() - 4000, 0))
            tail = fh.read().decode("utf-8", "replace")
    except OSError:
        pass
    return ChildResult(child.name, child.scope.proc.returncode, seconds, statuses, status_type(), tail, timed_out,
                       max(child.ranks, 1), child.scope.memory)


def _leader_of(child: Child) -> Any:
    """Node 0's multi-node session when ``child`` is one of its announced launches."""
    if child.launch is None:
        return None
    from .multinode import lead as multinode

    return multinode.current()


def kill(child: Child) -> None:
    child.scope.end()
    if child.sink is not None:
        child.sink.close()
