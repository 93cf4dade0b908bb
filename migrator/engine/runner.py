"""Run the scan over many files: discovery, cache, optional process pool, progress callback."""

from __future__ import annotations

import os
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path

import pathspec

from migrator import __version__
from migrator.census.store import traced_apis
from migrator.config import Settings
from migrator.engine.cache import ScanCache, content_digest
from migrator.engine.discover import Candidate, Skip, discover
from migrator.engine.scan_file import ScanOptions, scan_file
from migrator.model import FileResult, SkippedFile
from migrator.rules.catalogue import load_catalogue

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


def run(settings: Settings, paths: list[Path], progress: Progress | None = None, extra_key: str = "") -> EngineOutput:
    catalogue = load_catalogue()
    exclude = pathspec.GitIgnoreSpec.from_lines(settings.exclude) if settings.exclude else None
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
    )
    traced_key = content_digest(repr(options.traced).encode()) if options.traced else ""
    cache = ScanCache(
        settings.root,
        f"{__version__}|{catalogue.digest}|{_coverage_digest()}|{settings.cache_key()}|{extra_key}|{traced_key}",
    )
    if settings.use_cache:
        cache.load()

    results: dict[str, FileResult] = {}
    todo: list[tuple[Candidate, str | None]] = []
    for cand in candidates:
        digest = None
        if settings.use_cache:
            try:
                digest = content_digest(cand.path.read_bytes())
            except OSError:
                digest = None
            hit = cache.get(cand.rel, digest) if digest else None
            if hit is not None:
                results[cand.rel] = hit
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
            pool = stack.enter_context(ProcessPoolExecutor(max_workers=jobs))
            outputs = pool.map(_scan_one, work, chunksize=max(1, min(16, len(work) // (jobs * 4))))
        else:
            outputs = map(_scan_one, work)
        for (cand, digest), result in zip(todo, outputs):
            results[cand.rel] = result
            if digest and settings.use_cache:
                cache.put(cand.rel, digest, result)
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
