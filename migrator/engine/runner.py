"""Run the scan over many files: discovery, cache, optional process pool, progress callback.

The pool's workers die with the scan: SIGTERM or SIGINT to the parent terminates them before it
exits (by the same signal), and each worker also watches its parent (`PR_SET_PDEATHSIG` on Linux,
a parent-pid check elsewhere), so even a parent killed with SIGKILL leaves no worker behind.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ProcessPoolExecutor
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path

from migrator import __version__
from migrator.catalogue.loader import load_catalogue
from migrator.census.store import traced_apis
from migrator.config import Settings
from migrator.coverage._dtypes import training_dtypes
from migrator.engine.cache import ScanCache, content_digest
from migrator.engine.discover import Candidate, Skip, discover
from migrator.engine.scan_file import ScanOptions, scan_file
from migrator.globs import compile_globs
from migrator.model import FileResult, SkippedFile

Progress = Callable[[int, int], None]
POOL_THRESHOLD = 48  # below this many files to parse, a pool costs more than it saves


@dataclass(frozen=True)
class EngineOutput:
    files: tuple[FileResult, ...]
    skipped: tuple[SkippedFile, ...]


def _coverage_digest() -> str:
    """Identity of the shipped coverage tables: a regenerated table invalidates cached results."""
    from migrator.resources import data_dir

    try:
        return ",".join(content_digest(p.read_bytes()) for p in sorted(data_dir("op_coverage").glob("*.json")))
    except (FileNotFoundError, OSError):
        return "none"


def _scan_one(args: tuple[Path, str, str, ScanOptions]) -> FileResult:
    return scan_file(*args)


PARENT_POLL_S = 1.0


def _die_with_parent(parent: int) -> None:
    """Pool initializer: exit when the scan that started this worker is gone."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C reaches the whole group; the parent stops us
    signal.signal(signal.SIGTERM, signal.SIG_DFL)  # not the parent's handler, inherited by fork
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


class _Terminated(BaseException):
    """SIGTERM arrived while the pool was running (raised in the main thread)."""

    def __init__(self, signum: int):
        super().__init__(signum)
        self.signum = signum


def _raise_terminated(signum, frame) -> None:
    raise _Terminated(signum)


def _stop(pool: ProcessPoolExecutor) -> None:
    """Cancel what is queued and terminate the workers now (no waiting for running files)."""
    procs = list((getattr(pool, "_processes", None) or {}).values())
    pool.shutdown(wait=False, cancel_futures=True)
    for proc in procs:
        proc.terminate()
    for proc in procs:
        proc.join(timeout=5)
        if proc.is_alive():
            proc.kill()


@contextmanager
def worker_pool(jobs: int) -> Iterator[ProcessPoolExecutor]:
    """A process pool whose workers never outlive the caller: on SIGTERM, Ctrl-C or an error they
    are terminated; after SIGTERM the process then exits by that signal."""
    pool = ProcessPoolExecutor(max_workers=jobs, initializer=_die_with_parent, initargs=(os.getpid(),))
    in_main = threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGTERM, _raise_terminated) if in_main else None
    try:
        yield pool
    except _Terminated as exc:
        _stop(pool)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        os.kill(os.getpid(), exc.signum)  # exit as a SIGTERM'd process does
        raise SystemExit(128 + exc.signum) from None  # (if the signal is blocked)
    except BaseException:
        _stop(pool)
        raise
    else:
        pool.shutdown(wait=True)
    finally:
        if in_main:
            signal.signal(signal.SIGTERM, signal.SIG_DFL if previous is None else previous)


def _texts(candidates: list[Candidate]) -> Iterator[bytes]:
    for cand in candidates:
        try:
            yield cand.path.read_bytes()
        except OSError:
            continue  # the scan reports it


# results of one process's earlier scans, by cache key, then path: (content digest, result)
ScanMemo = dict[str, dict[str, tuple[str, FileResult]]]


def run(settings: Settings, paths: list[Path], progress: Progress | None = None, extra_key: str = "",
        memo: ScanMemo | None = None) -> EngineOutput:
    """`memo`: shared by the scans of one command (fix scans before and after writing): a file whose
    bytes did not change is not scanned again, with or without the disk cache."""
    catalogue = load_catalogue()
    exclude = compile_globs(settings.exclude)[0] if settings.exclude else None  # checked when the settings were read
    candidates: list[Candidate] = []
    skipped: list[SkippedFile] = []
    for item in discover(settings.root, paths, exclude):
        if isinstance(item, Skip):
            skipped.append(SkippedFile(item.rel, item.reason))
        else:
            candidates.append(item)

    options = ScanOptions(
        select=settings.select,
        ignore=settings.ignore,
        per_file_ignores=settings.per_file_ignores,
        soc=settings.soc,
        torch_npu_version=settings.torch_npu_version,
        traced=traced_apis(settings.root),
        target=settings.target,
        training_dtypes=training_dtypes(_texts(candidates)),
    )
    traced_key = content_digest(repr(options.traced).encode()) if options.traced else ""
    key = (f"{__version__}|{catalogue.digest}|{_coverage_digest()}|{settings.cache_key()}|{extra_key}|{traced_key}"
           f"|{','.join(options.training_dtypes)}")
    cache = ScanCache(settings.root, key)
    if settings.use_cache:
        cache.load()
    known = memo.setdefault(key, {}) if memo is not None else None

    results: dict[str, FileResult] = {}
    todo: list[tuple[Candidate, str | None]] = []
    for cand in candidates:
        digest = None
        if settings.use_cache or known is not None:
            try:
                digest = content_digest(cand.path.read_bytes())
            except OSError:
                digest = None
            remembered = known.get(cand.rel) if known is not None and digest else None
            hit = remembered[1] if remembered and remembered[0] == digest else None
            if hit is None and settings.use_cache and digest:
                hit = cache.get(cand.rel, digest)
            if hit is not None:
                results[cand.rel] = hit
                if known is not None and digest:
                    known[cand.rel] = (digest, hit)
                continue
        todo.append((cand, digest))

    total = len(candidates)
    done = len(results)
    if progress:
        progress(done, total)
    jobs = settings.jobs or (os.cpu_count() or 1)
    work = [(c.path, c.rel, c.kind, options) for c, _ in todo]
    with ExitStack() as stack:
        if jobs > 1 and len(work) >= POOL_THRESHOLD:
            pool = stack.enter_context(worker_pool(jobs))
            outputs = pool.map(_scan_one, work, chunksize=max(1, min(16, len(work) // (jobs * 4))))
        else:
            outputs = map(_scan_one, work)
        for (cand, digest), result in zip(todo, outputs):
            results[cand.rel] = result
            if digest and settings.use_cache:
                cache.put(cand.rel, digest, result)
            if digest and known is not None:
                known[cand.rel] = (digest, result)
            done += 1
            if progress:
                progress(done, total)
    if settings.use_cache:
        cache.save()
    ordered = tuple(results[c.rel] for c in candidates)
    for r in ordered:
        if r.skipped:
            skipped.append(SkippedFile(r.path, r.skipped))
    return EngineOutput(ordered, tuple(sorted(skipped, key=lambda s: s.path)))
