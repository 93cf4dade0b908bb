"""The worker processes of a pooled scan or fix: they never outlive the command.

SIGTERM or SIGINT to the parent terminates them before it exits (by the same signal), and each worker
also watches its parent (`PR_SET_PDEATHSIG` on Linux, a parent-pid check elsewhere), so even a parent
killed with SIGKILL leaves no worker behind.

The workers are a `multiprocessing.Pool`, not a `concurrent.futures.ProcessPoolExecutor`: the
executor's manager thread closes its wakeup pipe while CPython 3.11's exit hook (`_python_exit`)
may still write to it, which printed "Exception ignored ... EBADF" when a scan was interrupted.
`Pool.terminate()` stops the task handler, drains the task queue and terminates the workers itself,
with no exit hook of its own writing to a closed pipe. A worker that dies while it holds a task
(the OOM killer) would leave `Pool.imap` waiting for ever, so the results are polled and the pool's
workers checked between polls (`WorkerLost`).
"""

from __future__ import annotations

import functools
import multiprocessing
import multiprocessing.pool
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from types import FrameType
from typing import Any, TypeVar

PARENT_POLL_S = 1.0
RESULT_POLL_S = 1.0
LOCK_WAIT_S = 2.0  # terminate(): how long to wait for the task queue's lock a killed worker may hold
_DEFERRED = {signal.SIGTERM, signal.SIGINT}  # held while a pool is built (see worker_pool)

T = TypeVar("T")
R = TypeVar("R")


class WorkerLost(RuntimeError):
    """A worker process ended while the pool was running (killed from outside)."""


def _die_with_parent(parent: int) -> None:
    """Pool initializer: exit when the command that started this worker is gone."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C reaches the whole group; the parent stops us
    signal.signal(signal.SIGTERM, signal.SIG_DFL)  # not the parent's handler, inherited by fork
    signal.pthread_sigmask(signal.SIG_UNBLOCK, _DEFERRED)  # forked while the parent deferred them
    if sys.platform.startswith("linux"):
        try:
            import ctypes

            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(1, signal.SIGTERM, 0, 0, 0)  # PR_SET_PDEATHSIG: SIGTERM when the parent dies
        except (OSError, AttributeError):
            pass
    if os.getppid() != parent:  # the parent died before we got here
        os._exit(1)

    def watch() -> None:  # portable fallback (and a forkserver parent): poll the parent pid
        while os.getppid() == parent:
            threading.Event().wait(PARENT_POLL_S)
        os._exit(1)

    threading.Thread(target=watch, name="parent-watch", daemon=True).start()


def _chunks(items: list[T], size: int) -> list[list[T]]:
    return [items[i:i + size] for i in range(0, len(items), size)]


def _run_chunk(func: Callable[[T], R], chunk: list[T]) -> list[R]:
    return [func(item) for item in chunk]


class _Pool(multiprocessing.pool.Pool):
    @staticmethod
    def _help_stuff_finish(inqueue: Any, task_handler: threading.Thread, size: int) -> None:
        # CPython waits here for the task queue's read lock; a worker killed while it held it (an idle
        # worker holds it while it waits for a task) never gives it back, so terminate() hung for ever.
        # Drain without it after a short wait: the workers are terminated right after this.
        inqueue._rlock.acquire(timeout=LOCK_WAIT_S)
        while task_handler.is_alive() and inqueue._reader.poll():
            inqueue._reader.recv()
            time.sleep(0)


class WorkerPool:
    """Ordered `map` over worker processes that reports a lost worker instead of waiting for ever."""

    def __init__(self, jobs: int):
        self._pool = _Pool(processes=jobs, initializer=_die_with_parent, initargs=(os.getpid(),))
        self._seen: dict[int, multiprocessing.process.BaseProcess] = {}
        self._note_workers()

    def _note_workers(self) -> None:
        # Pool keeps its processes in `_pool` (no public accessor) and replaces an exited one within
        # 0.1 s, so every worker ever seen is kept to read its exit code
        for proc in getattr(self._pool, "_pool", ()):
            self._seen.setdefault(id(proc), proc)

    def map(self, func: Callable[[T], R], items: Iterable[T], chunksize: int = 1) -> Iterator[R]:
        # chunks of our own: `Pool.imap` with chunksize > 1 returns a plain generator (no timeout)
        chunks = _chunks(list(items), max(1, chunksize))
        results = self._pool.imap(functools.partial(_run_chunk, func), chunks)
        while True:
            try:
                yield from results.next(timeout=RESULT_POLL_S)
            except StopIteration:
                return
            except multiprocessing.TimeoutError:
                self._check_workers()

    def _check_workers(self) -> None:
        """A worker that ended before the pool was closed was killed: the task it held never comes back."""
        self._note_workers()
        for proc in self._seen.values():
            if proc.exitcode is not None:
                raise WorkerLost(f"a worker process ended (exit code {proc.exitcode}) while the pool was running")

    def close(self) -> None:
        self._pool.close()
        self._pool.join()

    def terminate(self) -> None:
        """Stop now: queued tasks dropped, workers terminated, the pool's threads joined."""
        self._pool.terminate()
        self._pool.join()


class _Terminated(BaseException):
    """SIGTERM arrived while the pool was running (raised in the main thread)."""

    def __init__(self, signum: int):
        super().__init__(signum)
        self.signum = signum


def _raise_terminated(signum: int, frame: FrameType | None) -> None:
    raise _Terminated(signum)


@contextmanager
def worker_pool(jobs: int) -> Iterator[WorkerPool]:
    """A process pool whose workers never outlive the caller: on SIGTERM, Ctrl-C or an error they
    are terminated; after SIGTERM the process then exits by that signal."""
    in_main = threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGTERM, _raise_terminated) if in_main else None
    # SIGTERM or Ctrl-C while the pool is being built would leave it half-built, its workers started and
    # out of reach: the signals wait until it exists, then arrive where the pool is terminated
    blocked = signal.pthread_sigmask(signal.SIG_BLOCK, _DEFERRED) if in_main else set()
    try:
        pool = WorkerPool(jobs)
    except BaseException:
        if in_main:  # the handler first: a deferred SIGTERM then ends the process as SIGTERM does
            signal.signal(signal.SIGTERM, signal.SIG_DFL if previous is None else previous)
            signal.pthread_sigmask(signal.SIG_SETMASK, blocked)
        raise
    try:
        if in_main:
            signal.pthread_sigmask(signal.SIG_SETMASK, blocked)  # a deferred signal is raised here
        yield pool
    except _Terminated as exc:
        pool.terminate()
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        os.kill(os.getpid(), exc.signum)  # exit as a SIGTERM'd process does
        raise SystemExit(128 + exc.signum) from None  # (if the signal is blocked)
    except BaseException:
        pool.terminate()
        raise
    else:
        pool.close()
    finally:
        if in_main:
            signal.signal(signal.SIGTERM, signal.SIG_DFL if previous is None else previous)
