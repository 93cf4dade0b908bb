"""Warm starts, the zygote: validation children fork from a process that has already imported torch.

Importing torch costs a child 1.5-2 s of CPU, more than most of a stage's work on the samples. Per
validate run (and per child environment) the parent starts one *zygote*,
``python -m migrator.validation.child.zygote SOCKET``, that imports torch, numpy and safetensors, runs no
torch op and starts no thread, then forks a worker for every request on its Unix socket.

The process the parent (or torchrun) starts is still the worker, now a client (:mod:`.warm`). The
zygote becomes a child subreaper (a worker's orphans stay below it) and the forked worker takes the client's streams, directory, environment and
``sys.path``, a session of its own and the run's memory limit, and runs :func:`.worker.serve` as a cold
child would; it notes ``STARTED_NOTE`` in its log. When it exits, the zygote ends its session and its
orphans (what the client's scope would have ended) before telling the client. When a client dies (a timeout, SIGKILL, its torchrun ending) its connection closes and the
zygote does the same at once; when the zygote's own parent dies
it kills its workers and exits. The zygote's scope, ended with the validate run, ends whatever is left.

A client runs cold itself whenever the zygote cannot serve it exactly: no socket or no answer, an
environment that differs from the zygote's in anything but the per-rank keys torchrun sets (what was
read when torch was imported must be the same), or a zygote that found an accelerator initialised or a
device backend loaded at import (forking those is unsafe). ``MIGRATE_VALIDATE_WARM=0`` turns warm starts
off.
"""

from __future__ import annotations

import os
import signal
import socket
import sys
from collections.abc import Mapping

from migrator.ground.process_scope import SCOPE_ENV, become_subreaper, kill_session_and_descendants

from ..warm_contract import MEMORY_ENV, READY, SOCKET_ENV, STARTED_NOTE, per_child
from .warm import receive, send


def env_difference(zygote: Mapping[str, str], client: Mapping[str, str]) -> list[str]:
    """The keys that keep ``client`` from forking off ``zygote`` (empty: it may)."""
    keys = set(zygote) | set(client)
    return sorted(k for k in keys if zygote.get(k) != client.get(k) and not per_child(k))


def _preload() -> str | None:
    """Import what every worker imports; the reason forking is unsafe, or None."""
    import numpy  # noqa: F401
    import safetensors.torch  # noqa: F401
    import torch
    import torch._inductor  # noqa: F401  (torch.use_deterministic_algorithms imports it: ~1 s)

    _preload_harness()
    if torch.cuda.is_initialized():
        return "CUDA was initialised at import"
    loaded = [name for name in ("torch_npu", "torch_mlu", "intel_extension_for_pytorch") if name in sys.modules]
    if loaded:
        return f"a device backend was loaded at import ({', '.join(loaded)})"
    try:
        threads = len(os.listdir("/proc/self/task"))
    except OSError:
        return "cannot count this process's threads (no /proc)"
    if threads > 1:
        return f"importing torch started {threads - 1} thread(s)"
    return None


def _preload_harness() -> None:
    """The harness's own modules, imported (and the record converter built) once here rather than in every
    fork: ~0.15 s of CPU per worker. Imports only: no layer is installed, no ``torch_npu`` registered, no
    runner's job read; the bench modules stay out (``--bench`` off imports none)."""
    from .. import records
    from . import cuda_reference, npu_emulation, optrace, parallel, protocol, recorder, script_hooks, side, worker  # noqa: F401

    records.prepare_converter()


class Zygote:
    """The fork server (see the module docstring): one selector loop, no threads."""

    def __init__(self, path: str, started_env: Mapping[str, str]) -> None:
        import selectors

        self.pid = os.getpid()
        self.parent = os.getppid()
        self.env = dict(started_env)  # what the imports saw (they may add keys: TORCHINDUCTOR_CACHE_DIR)
        self.added = {k: v for k, v in os.environ.items() if k not in started_env}
        self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.listener.bind(path)
        self.listener.listen(64)
        self.selector = selectors.DefaultSelector()
        self.selector.register(self.listener, selectors.EVENT_READ)
        self.wake_r, self.wake_w = os.pipe()
        os.set_blocking(self.wake_w, False)
        self.selector.register(self.wake_r, selectors.EVENT_READ)
        signal.set_wakeup_fd(self.wake_w)
        signal.signal(signal.SIGCHLD, lambda *_: None)  # wakes the selector through the wakeup fd
        self.workers: dict[int, socket.socket] = {}  # worker pid -> its client's connection
        self.tokens: dict[int, str] = {}  # worker pid -> its client's scope token (its orphans carry it)

    def serve(self) -> int:
        while True:
            for key, _events in self.selector.select(timeout=1.0):
                if key.fileobj is self.listener:
                    self._accept()
                elif key.fileobj == self.wake_r:
                    os.read(self.wake_r, 512)
                else:
                    self._client_closed(key.fileobj)  # type: ignore[arg-type]
            self._reap()
            if os.getppid() != self.parent:  # the validate run is gone: nobody will read the workers
                for pid in list(self.workers):
                    self._end(pid)
                return 0

    def _accept(self) -> None:
        import selectors

        conn, _ = self.listener.accept()
        try:
            request, fds = receive(conn, with_fds=3)
        except (OSError, ValueError):
            conn.close()
            return
        if request is None or len(fds) != 3:
            for fd in fds:
                os.close(fd)
            conn.close()
            return
        env = request.get("env")
        differs = env_difference(self.env, env) if isinstance(env, dict) else ["env"]
        if differs or not isinstance(env, dict):
            for fd in fds:
                os.close(fd)
            send(conn, {"cold": f"environment differs in {', '.join(differs[:5])}"})
            conn.close()
            return
        pid = os.fork()
        if pid == 0:
            self._become_worker(conn, request, fds)  # never returns
        for fd in fds:
            os.close(fd)
        self.workers[pid] = conn
        self.tokens[pid] = str(env.get(SCOPE_ENV, ""))
        send(conn, {"pid": pid})
        self.selector.register(conn, selectors.EVENT_READ)

    def _client_closed(self, conn: socket.socket) -> None:
        """A client's connection is readable: it sends nothing more, so it is gone; so is its worker."""
        for pid, known in list(self.workers.items()):
            if known is conn:
                self._end(pid)
        self.selector.unregister(conn)

    def _end(self, pid: int) -> None:
        """What a cold child's scope ends: the worker, its session, what is below it and its orphans."""
        kill_session_and_descendants(pid, self.tokens.get(pid) or None)

    def _reap(self) -> None:
        while True:
            try:  # peek first: the zombie holds its pid while its session and orphans are ended
                info = os.waitid(os.P_ALL, 0, os.WEXITED | os.WNOHANG | os.WNOWAIT)
            except ChildProcessError:
                return
            if info is None:
                return
            pid = info.si_pid
            conn = self.workers.pop(pid, None)
            if conn is not None:
                self._end(pid)  # before the client hears of it, as its scope would have ended them
                self.tokens.pop(pid, None)
            _, status = os.waitpid(pid, 0)
            if conn is None:
                continue  # an orphan re-parented here
            try:
                send(conn, {"status": status})
            except OSError:
                pass
            try:
                self.selector.unregister(conn)
            except (KeyError, ValueError):
                pass
            conn.close()

    def _become_worker(self, conn: socket.socket, request: dict[str, object], fds: list[int]) -> None:
        """In the fork: take on the client's process state and run the worker; exits the interpreter."""
        signal.set_wakeup_fd(-1)
        for signum in (signal.SIGCHLD, signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            signal.signal(signum, signal.SIG_DFL if signum != signal.SIGINT else signal.default_int_handler)
        self.selector.close()
        for sock in (self.listener, conn, *self.workers.values()):
            sock.close()
        os.close(self.wake_r)
        os.close(self.wake_w)
        os.setsid()
        for target, fd in enumerate(fds):
            os.dup2(fd, target)
            os.close(fd)
        env, argv = request["env"], request["argv"]
        assert isinstance(env, dict) and isinstance(argv, list)
        from . import worker

        agent = argv[1:2] == [worker.TORCHRUN]
        os.environ.clear()
        # torchrun's agent keeps the socket (its ranks are clients too) and adds nothing (a cold agent imports
        # no more than torch.distributed.run, and a key added here would keep its ranks from forking off us)
        os.environ.update({k: v for k, v in env.items() if k != SOCKET_ENV or agent})
        for key, value in ({} if agent else self.added).items():  # as a cold child's imports would have set them
            os.environ.setdefault(key, value)
        limit = env.get(MEMORY_ENV)
        if limit:
            import resource

            resource.setrlimit(resource.RLIMIT_DATA, (int(limit), int(limit)))
        cwd, path = request["cwd"], request["path"]
        assert isinstance(cwd, str) and isinstance(path, list)
        os.chdir(cwd)
        sys.path[:] = [str(p) for p in path]
        sys.argv[:] = [str(a) for a in argv]
        print(STARTED_NOTE.format(zygote=self.pid), file=sys.stderr, flush=True)
        module = request.get("module")
        if agent:
            code = worker.run_torchrun(sys.argv[2:])
        elif isinstance(module, str):  # another child program of ours (the census child): its main, as run cold
            import importlib

            code = importlib.import_module(module).main(sys.argv[1:])
        else:
            code = worker.serve(sys.argv[1])
        worker.finish(code)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    started_env = dict(os.environ)
    unsafe = _preload()
    if unsafe:
        print(f"warm starts off: {unsafe}", file=sys.stderr, flush=True)
        return 3
    become_subreaper()  # a worker's orphans stay below the zygote, where its scope finds them
    zygote = Zygote(argv[0], started_env)
    os.write(1, READY)
    return zygote.serve()


if __name__ == "__main__":
    sys.exit(main())
