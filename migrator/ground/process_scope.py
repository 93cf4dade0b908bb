"""A program we run and everything it starts, ended together (validation children, torchrun ranks, the
census child, the ``plan TREE`` probe).

A :class:`Scope` starts its command in a session of its own, tags it with a token in its environment,
limits its private memory (``RLIMIT_DATA``) and makes this process a child subreaper (Linux ``prctl``),
so a grandchild whose parent exits is re-parented here rather than to init. Its members are every
process below the child, in the child's session, or carrying the token (a ``setsid`` daemon keeps its
environment), plus every member seen while it ran. :meth:`Scope.end` SIGKILLs them until none is left
and reaps the ones re-parented here; it runs when the child exits (pass or fail), on timeout, and for
every scope still open when this process exits (Ctrl-C, an exception, SIGTERM or SIGHUP, which
:func:`_install_exit_handlers` turns into ``SystemExit``).
"""

from __future__ import annotations

import atexit
import os
import signal
import subprocess
import threading
import time
import uuid
from typing import IO, Any

SCOPE_ENV = "MIGRATE_PROCESS_SCOPE"  # the token every member inherits
MEMORY_ENV = "MIGRATE_CHILD_MEMORY"  # e.g. "8G", "512M"; "none" for no limit
_PR_SET_CHILD_SUBREAPER = 36
_MEMORY_MARKERS = ("MemoryError", "std::bad_alloc", "Cannot allocate memory")

_open: dict[str, Scope] = {}
_lock = threading.Lock()
_installed = False


def memory_limit() -> int | None:
    """The per-child limit on private memory in bytes: ``MIGRATE_CHILD_MEMORY`` or this machine's RAM."""
    raw = os.environ.get(MEMORY_ENV, "").strip()
    if raw.lower() in ("none", "0", "off"):
        return None
    if raw:
        units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}
        scale = units.get(raw[-1].upper(), 1)
        digits = raw[:-1] if raw[-1].upper() in units else raw
        try:
            return int(float(digits) * scale)
        except ValueError:
            raise ValueError(f"{MEMORY_ENV}={raw!r}: expected a size like 8G or 512M, or 'none'") from None
    try:
        return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):  # pragma: no cover - not a POSIX sysconf
        return None


def hit_memory_limit(log_tail: str, limit: int | None) -> str | None:
    """A clear verdict when the child's output says it ran out of memory under ``limit``."""
    if limit is None or not any(marker in log_tail for marker in _MEMORY_MARKERS):
        return None
    return (f"the program ran out of memory under its limit of {limit / (1 << 30):.1f} GiB of private memory "
            f"(set {MEMORY_ENV}, e.g. {MEMORY_ENV}=64G, or {MEMORY_ENV}=none)")


def become_subreaper() -> None:
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    except (OSError, AttributeError):  # pragma: no cover - not Linux: session and token tracking remain
        pass


def _on_signal(signum: int, _frame: Any) -> None:
    raise SystemExit(128 + signum)  # unwinds through `finally` and atexit, which end the open scopes


def _install_exit_handlers() -> None:
    global _installed
    if _installed:
        return
    _installed = True
    become_subreaper()
    atexit.register(end_all)
    if threading.current_thread() is threading.main_thread():
        for sig in (signal.SIGTERM, signal.SIGHUP):
            if signal.getsignal(sig) is signal.SIG_DFL:
                signal.signal(sig, _on_signal)


def _processes() -> list[tuple[int, int, int, str]]:
    """(pid, ppid, session, state) of every process in ``/proc``."""
    rows: list[tuple[int, int, int, str]] = []
    try:
        entries = os.listdir("/proc")
    except OSError:
        return rows
    for entry in entries:
        if not entry.isdigit():
            continue
        try:  # raw descriptor calls: a scope's wait reads this every 0.25 s, half the cost of a buffered open
            fd = os.open(f"/proc/{entry}/stat", os.O_RDONLY)
            try:
                stat = os.read(fd, 8192)  # one line, well under a page: the kernel gives it in one read
            finally:
                os.close(fd)
        except OSError:
            continue  # exited meanwhile
        fields = stat[stat.rindex(b")") + 2:].split(None, 4)  # after "pid (comm) ": state, ppid, pgrp, session
        rows.append((int(entry), int(fields[1]), int(fields[3]), fields[0].decode()))
    return rows


def _descendants(rows: list[tuple[int, int, int, str]], roots: list[int]) -> set[int]:
    """Every process below ``roots`` in the ``rows`` of :func:`_processes`."""
    children: dict[int, list[int]] = {}
    for pid, ppid, _sid, _state in rows:
        children.setdefault(ppid, []).append(pid)
    found: set[int] = set()
    todo = list(roots)
    while todo:
        for child in children.get(todo.pop(), []):
            if child not in found:
                found.add(child)
                todo.append(child)
    return found


def kill_session_and_descendants(root: int, token: str | None = None) -> None:
    """SIGKILL ``root``, every process in its session and below it, and the orphans re-parented here that
    carry ``token`` (a scope's :data:`SCOPE_ENV` value), until none is left."""
    me = os.getpid()
    marker = f"{SCOPE_ENV}={token}".encode() if token else None
    for _round in range(200):
        rows = _processes()
        targets = _descendants(rows, [root]) | {pid for pid, _ppid, sid, _s in rows if sid == root} | {root}
        if marker is not None:
            targets |= {pid for pid, ppid, _sid, _s in rows if ppid == me and pid != root and _has_token(pid, marker)}
        live = [pid for pid, _ppid, _sid, state in rows if pid in targets and state != "Z"]
        if not live:
            return
        for pid in live:
            try:
                os.kill(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        time.sleep(0.01)


def _has_token(pid: int, token: bytes) -> bool:
    try:
        with open(f"/proc/{pid}/environ", "rb") as fh:
            return token in fh.read().split(b"\0")
    except OSError:
        return False


class Scope:
    """``cmd`` started as a child with its own session, environment token and memory limit."""

    def __init__(self, cmd: list[str], *, env: dict[str, str], cwd: str, stdout: IO[Any] | int | None,
                 stderr: IO[Any] | int | None = subprocess.STDOUT, memory: int | None = None) -> None:
        _install_exit_handlers()
        self.token = uuid.uuid4().hex
        self.memory = memory
        self.seen: set[int] = set()
        env = {**env, SCOPE_ENV: self.token}
        self.proc = subprocess.Popen(cmd, stdout=stdout, stderr=stderr, env=env, cwd=cwd, start_new_session=True)
        self.pid = self.proc.pid
        with _lock:
            _open[self.token] = self
        if memory:
            self._limit(memory)

    def _limit(self, memory: int) -> None:
        """Set on the started child (no `preexec_fn`: unsafe with threads) before its interpreter has
        loaded anything sizeable; inherited by everything it starts."""
        import resource

        try:
            resource.prlimit(self.pid, resource.RLIMIT_DATA, (memory, memory))
        except (ProcessLookupError, PermissionError, ValueError, OSError):
            pass  # exited already, or a limit this system refuses: run without one

    def members(self) -> set[int]:
        """Every live process of this scope (the child itself included while it runs)."""
        rows = _processes()
        found = _descendants(rows, [self.pid, *self.seen])
        token = f"{SCOPE_ENV}={self.token}".encode()
        me = os.getpid()
        for pid, ppid, sid, _state in rows:
            if pid == me:
                continue
            # an orphan is re-parented here (the subreaper) or, where that failed, to init: only those
            # need their environment read
            if sid == self.pid or pid in self.seen or (ppid in (me, 1) and _has_token(pid, token)):
                found.add(pid)
        if self.proc.returncode is None:
            found.add(self.pid)
        found.discard(me)
        # zombies too: one whose parent dies unreaped is re-parented here, and only `seen` still names it
        self.seen |= found
        return found

    def wait(self, timeout: float | None) -> bool:
        """Wait for the child itself, noting the scope's members as it runs; False on timeout."""
        deadline = None if timeout is None else time.monotonic() + timeout
        pause = 0.02
        while self.proc.poll() is None:
            if deadline is not None and time.monotonic() >= deadline:
                return False
            self.members()
            step = pause if deadline is None else min(pause, max(deadline - time.monotonic(), 0.0))
            try:
                self.proc.wait(timeout=step)
            except subprocess.TimeoutExpired:
                pass
            pause = min(pause * 2, 0.25)
        return True

    def end(self) -> int:
        """SIGKILL every member until none is left (each round finds what the last one started) and reap
        the ones re-parented here; returns how many were killed besides the child itself."""
        killed: set[int] = set()
        me = os.getpid()
        for _round in range(200):
            self.proc.poll()
            targets = self.members() - {self.pid}
            rows = {pid: (ppid, state) for pid, ppid, _s, state in _processes() if pid in targets}
            for pid, (ppid, state) in rows.items():
                if state != "Z":
                    try:
                        os.kill(pid, signal.SIGKILL)
                        killed.add(pid)
                    except (ProcessLookupError, PermissionError):
                        pass
                elif ppid == me:
                    try:
                        os.waitpid(pid, os.WNOHANG)
                    except ChildProcessError:
                        pass
            if self.proc.returncode is None:
                try:
                    os.killpg(self.pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass
            if not rows and self.proc.returncode is not None:
                break
            time.sleep(0.01)
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:  # pragma: no cover - SIGKILL was sent
            pass
        with _lock:
            _open.pop(self.token, None)
        return len(killed)


def end_all() -> None:
    """End every scope still open (at exit: an exception, Ctrl-C or a signal stopped the run)."""
    with _lock:
        scopes = list(_open.values())
    for scope in scopes:
        scope.end()
