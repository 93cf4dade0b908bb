"""Run the scan over many files: discovery, cache, optional process pool, progress callback.

Each file is read once: with the cache (or a memo) on, by the parent for its digest, and a miss's
bytes go to the worker, a window of at most `WINDOW_BYTES` at a time (memory bounded per window, not
per tree); otherwise by the worker that scans it (`engine/scanned.py`). The tree's training
dtypes are combined here from the workers' per-file evidence. The pool's workers never outlive the
scan (`engine/workers.py`).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Mapping
from contextlib import AbstractContextManager, ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from migrator import __version__
from migrator.catalogue.loader import load_catalogue
from migrator.engine.cache import ScanCache, content_digest
from migrator.engine.discover import Candidate, Skip, discover, file_kind
from migrator.engine.scan_file import ScanOptions, read_limit
from migrator.engine.scanned import ScannedFile, scan_one, tree_training_dtypes
from migrator.ground import input_files
from migrator.ground.config import Settings
from migrator.ground.cycles import earlier_objects_frozen
from migrator.ground.framework_imports import ImportLines
from migrator.ground.globs import compile_globs
from migrator.ground.input_files import MAX_NOTEBOOK_BYTES
from migrator.ground.model import FileResult, SkippedFile

if TYPE_CHECKING:
    from migrator.engine.workers import WorkerPool

Progress = Callable[[int, int], None]
POOL_THRESHOLD = 48  # below this many files to parse, a pool costs more than it saves
WINDOW_BYTES = 16 << 20  # read-ahead bytes held for the scan at most (with the cache or a memo on)


def worker_pool(jobs: int) -> AbstractContextManager[WorkerPool]:
    """`engine.workers.worker_pool`, imported when a pool is started: a scan in one process needs no
    multiprocessing (looked up here: fix's pool and tests use this name)."""
    from migrator.engine.workers import worker_pool as start

    return start(jobs)


@dataclass(frozen=True)
class EngineOutput:
    files: tuple[FileResult, ...]
    skipped: tuple[SkippedFile, ...]
    training_dtypes: tuple[str, ...] = ()  # the 16-bit dtypes the scanned files show (op verdicts)
    # the framework import lines of each Python file read, by relative path (route detection reads no file again)
    framework_imports: Mapping[str, ImportLines] = field(default_factory=dict)
    # (relative path, absolute path, kind) of each file discovery found, in its order (route detection's files)
    discovered: tuple[tuple[str, Path, str], ...] = ()


def _coverage_digest() -> str:
    """Identity of the shipped coverage tables: a regenerated table invalidates cached results."""
    from migrator.ground.resources import data_dir

    try:
        return ",".join(content_digest(p.read_bytes()) for p in sorted(data_dir("op_coverage").glob("*.json")))
    except (FileNotFoundError, OSError):
        return "none"


def _scan_one(args: tuple[Path, str, str, ScanOptions, bytes | None]) -> ScannedFile:
    return scan_one(*args)


# results of one process's earlier scans, by cache key, then path: (content digest, scanned file)
ScanMemo = dict[str, dict[str, tuple[str, ScannedFile]]]


def _discovered(settings: Settings, paths: list[Path], overlay: Mapping[str, bytes],
                ) -> tuple[list[Candidate], list[SkippedFile], int]:
    """The files to scan, and how many of them discovery found: an overlay file discovery cannot see yet (a module
    fix would create) is added after those."""
    exclude = compile_globs(settings.exclude)[0] if settings.exclude else None  # checked when the settings were read
    candidates: list[Candidate] = []
    skipped: list[SkippedFile] = []
    for item in discover(settings.root, paths, exclude):
        if isinstance(item, Skip):
            skipped.append(SkippedFile(item.rel, item.reason))
        else:
            candidates.append(item)
    seen, found = {c.rel for c in candidates}, len(candidates)
    for rel in overlay:
        kind = file_kind(Path(rel))
        if rel not in seen and kind is not None and _under(settings.root / rel, paths):
            candidates.append(Candidate(settings.root / rel, rel, kind, False))
    return candidates, skipped, found


def _under(path: Path, paths: list[Path]) -> bool:
    return any(path == p or path.is_relative_to(p) for p in paths)


def _cache_key(settings: Settings, options: ScanOptions, extra_key: str) -> str:
    catalogue = load_catalogue()
    traced = (options.traced, options.census_perf)
    traced_key = content_digest(repr(traced).encode()) if any(traced) else ""
    return f"{__version__}|{catalogue.digest}|{_coverage_digest()}|{settings.cache_key()}|{extra_key}|{traced_key}"


class _Results:
    """Per-file results found in this command's memo or the disk cache, and those still to scan."""

    def __init__(self, settings: Settings, key: str, memo: ScanMemo | None, overlay: Mapping[str, bytes]):
        self.use_cache = settings.use_cache
        self.cache = ScanCache(settings.root, key)
        if self.use_cache:
            self.cache.load()
        self.known = memo.setdefault(key, {}) if memo is not None else None
        self.overlay = overlay
        self.scanned: dict[str, ScannedFile] = {}

    def digest(self, cand: Candidate) -> tuple[str | None, bytes | None]:
        """The content digest (None: not cached), and the bytes the worker may scan without reading again."""
        if cand.rel in self.overlay:
            return content_digest(self.overlay[cand.rel]), None
        if not (self.use_cache or self.known is not None):
            return None, None
        try:  # through the one reader: a FIFO or a huge file is the worker's to report, not the digest's to read
            data = input_files.read_bytes(cand.path, MAX_NOTEBOOK_BYTES)
        except OSError:  # InputRefused included: the file is scanned (and its refusal reported) uncached
            return None, None
        # over its kind's limit, the worker reads it again to refuse or skip it as it would uncached
        return content_digest(data), data if len(data) <= read_limit(cand.kind) else None

    def lookup(self, cand: Candidate, digest: str | None) -> bool:
        if digest is None:
            return False
        remembered = self.known.get(cand.rel) if self.known is not None else None
        hit = remembered[1] if remembered and remembered[0] == digest else None
        if hit is None and self.use_cache and cand.rel not in self.overlay:
            hit = self.cache.get(cand.rel, digest)
        if hit is None:
            return False
        self.keep(cand, digest, hit)
        return True

    def keep(self, cand: Candidate, digest: str | None, scanned: ScannedFile) -> None:
        self.scanned[cand.rel] = scanned
        if digest and self.use_cache and cand.rel not in self.overlay:
            self.cache.put(cand.rel, digest, scanned)
        if digest and self.known is not None:
            self.known[cand.rel] = (digest, scanned)

    def save(self) -> None:
        if self.use_cache:
            self.cache.save()


def _with_extensions(settings: Settings, options: ScanOptions, candidates: list[Candidate],
                     overlay: Mapping[str, bytes]) -> ScanOptions:
    """The options with the tree's own CUDA extensions (only where a `.cu`/`.cuh` file is scanned)."""
    if not any(c.kind == "cuda" for c in candidates):
        return options
    from dataclasses import replace

    from migrator.engine.extension_inventory import build

    inventory = build(settings.root, [c.rel for c in candidates if c.kind == "python"], overlay)
    return replace(options, extensions=inventory.facts())


def _largest_first(todo: list[tuple[Candidate, str | None, bytes | None]]) -> list[int]:
    """The files' indices, largest first: a pool's last chunks are then its smallest files, so no worker is
    left scanning a large one while the others wait."""
    def size(i: int) -> int:
        cand, _, data = todo[i]
        if data is not None:
            return len(data)
        try:
            return os.stat(cand.path).st_size
        except OSError:
            return 0

    return sorted(range(len(todo)), key=size, reverse=True)


def _windows(candidates: list[Candidate], results: _Results, overlay: Mapping[str, bytes], counts: list[int],
             ) -> Iterator[tuple[list[tuple[Candidate, str | None, bytes | None]], bool]]:
    """The files to scan (candidate, digest, the bytes read for the digest), in windows holding at most
    WINDOW_BYTES of those bytes, each with whether it is the last: a tree's bytes are never all held at once
    (the parent, and workers forked after it, stay bounded), and each file is still read once. A file the
    cache or the memo knows counts as done (`counts[1]`)."""
    window: list[tuple[Candidate, str | None, bytes | None]] = []
    held = 0
    for cand in candidates:
        digest, data = results.digest(cand)
        if results.lookup(cand, digest):
            counts[1] += 1
            continue
        data = overlay.get(cand.rel, data)
        window.append((cand, digest, data))
        held += len(data) if data is not None else 0
        if held >= WINDOW_BYTES:
            yield window, False
            window, held = [], 0
    yield window, True


def run(settings: Settings, paths: list[Path], options: ScanOptions, progress: Progress | None = None,
        extra_key: str = "", memo: ScanMemo | None = None, overlay: Mapping[str, bytes] | None = None) -> EngineOutput:
    """Scan with `options` (built from the settings by `migrator.pipeline.options.scan_options`).
    `memo`: shared by the scans of one command (fix scans before and after writing): a file whose bytes
    did not change is not scanned again, with or without the disk cache. `overlay`: root-relative path
    -> bytes scanned instead of the file on disk (fix's planned texts, before they are written)."""
    overlay = overlay or {}
    candidates, skipped, found = _discovered(settings, paths, overlay)
    options = _with_extensions(settings, options, candidates, overlay)
    if options.extensions.targets or options.extensions.routes:  # file results depend on the inventory
        extra_key += "|ext:" + content_digest(repr(options.extensions).encode())
    # the key names the disk cache's file and the memo's part: without either (`--no-cache`, one scan) it is not
    # made (it hashed the coverage tables' megabyte)
    key = _cache_key(settings, options, extra_key) if settings.use_cache or memo is not None else ""
    results = _Results(settings, key, memo, overlay)
    counts = [len(candidates), 0]  # total, done
    jobs = settings.jobs or (os.cpu_count() or 1)
    with ExitStack() as stack:
        stack.enter_context(earlier_objects_frozen())
        pool = None
        for window, last in _windows(candidates, results, overlay, counts):
            if progress:
                progress(counts[1], counts[0])
            if pool is None and jobs > 1 and (not last or len(window) >= POOL_THRESHOLD):
                pool = stack.enter_context(worker_pool(jobs))
            order = _largest_first(window) if pool is not None else list(range(len(window)))
            work = [(window[i][0].path, window[i][0].rel, window[i][0].kind, options, window[i][2]) for i in order]
            outputs = (pool.map(_scan_one, work, chunksize=max(1, min(16, len(work) // (jobs * 4))))
                       if pool is not None else map(_scan_one, work))
            scanned: dict[int, ScannedFile] = {}
            for i, result in zip(order, outputs):
                scanned[i] = result
                counts[1] += 1
                if progress:
                    progress(counts[1], counts[0])
            for i, (cand, digest, _) in enumerate(window):  # kept in the files' order, whatever order they ran in
                results.keep(cand, digest, scanned.pop(i))
    results.save()
    files = [results.scanned[c.rel] for c in candidates]
    dtypes = tree_training_dtypes(files)
    ordered = tuple(f.for_training(dtypes) for f in files)
    skipped.extend(SkippedFile(r.path, r.skipped) for r in ordered if r.skipped)
    imports = {c.rel: f.framework_imports for c, f in zip(candidates, files) if f.framework_imports is not None}
    discovered = tuple((c.rel, c.path, c.kind) for c in candidates[:found])
    return EngineOutput(ordered, tuple(sorted(skipped, key=lambda s: s.path)), dtypes, imports, discovered)
