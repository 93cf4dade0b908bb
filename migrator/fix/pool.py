"""Fix Python modules in parallel: libcst is pure Python, so a big tree is fixed one module per worker.

Workers are the scan's (`engine.workers.worker_pool`: they never outlive the caller), started by
`early_workers` before fix scans the tree: forked then, each holds its own module's work, not a copy
of what the scan left in this process (a tree's results, its bytes: 230 MiB per worker on 3,795
files). A worker gets
(text, findings, target, entry point) and returns the new text with the *indices* of the findings it
applied or declined, so the caller keeps its own Finding objects. A module the fixer raised on is an
error of that module only, as in the serial path.
"""

from __future__ import annotations

import contextlib
import itertools
import os
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from migrator.fix.import_order import ImportStyle
from migrator.fix.runtime_module import RuntimeImport
from migrator.fix.spool import Spool, Spooled
from migrator.ground.cycles import cycle_collection_paused
from migrator.ground.model import Finding

if TYPE_CHECKING:
    from migrator.engine.workers import WorkerPool

# below this much Python source a pool costs more (worker start, libcst import) than it saves
POOL_MIN_BYTES = 400_000
POOL_MIN_FILES = 4
EARLY_MIN_PYTHON_FILES = 48  # a tree with fewer is fixed without a pool started ahead (the scan's own threshold)


@dataclass(frozen=True)
class PythonJob:
    text: str
    findings: tuple[Finding, ...]
    target: str
    entry_point: bool
    runtime: RuntimeImport | None = None  # where the tree's runtime module is (portable target)
    style: ImportStyle = ImportStyle()  # the repository's isort / ruff settings
    context: tuple[Finding, ...] = ()  # every finding of the file, manual ones too (what a check guards)
    torch_autoload: bool = False  # the pinned torch loads torch_npu itself (fix/torch_pin.py)


@dataclass(frozen=True)
class PythonOutcome:
    text: str | Spooled  # in the caller's spool when one was given
    applied: list[Finding]
    declined: list[tuple[Finding, str]]
    error: str | None = None
    runtime_names: frozenset[str] = frozenset()


@dataclass(frozen=True)
class _Indexed:
    text: str | None  # None: the module's own text (not sent back)
    applied: tuple[int, ...]
    declined: tuple[tuple[int, str], ...]
    error: str | None
    runtime_names: frozenset[str] = frozenset()


def _fix_one(job: PythonJob) -> _Indexed:
    from migrator.catalogue.loader import load_catalogue
    from migrator.fix.python_fixer import fix_python

    try:
        with cycle_collection_paused():
            result = fix_python(job.text, list(job.findings), load_catalogue().rules, job.target, job.entry_point,
                                job.runtime, job.style, job.context, job.torch_autoload)
        index = {id(f): i for i, f in enumerate(job.findings)}
        return _Indexed(
            result.text if result.text != job.text else None,
            tuple(index[id(f)] for f in result.applied),
            tuple((index[id(f)], why) for f, why in result.declined),
            None,
            result.runtime_names,
        )
    except Exception as exc:  # noqa: BLE001 - one bad file never stops the run
        return _Indexed(job.text, (), (), f"internal fixer error ({exc.__class__.__name__}: {exc}); file left unchanged")


def _outcome(job: PythonJob, got: _Indexed, spool: Spool | None) -> PythonOutcome:
    text = job.text if got.text is None else spool.keep(got.text) if spool is not None else got.text
    return PythonOutcome(
        text, [job.findings[i] for i in got.applied], [(job.findings[i], why) for i, why in got.declined], got.error,
        got.runtime_names,
    )


@contextmanager
def early_workers(jobs: int, root: Path, paths: list[Path]) -> Iterator[WorkerPool | None]:
    """The fix's worker pool, started now (before the scan) where the tree may need one: more than one
    CPU and at least `EARLY_MIN_PYTHON_FILES` Python files (excluded ones counted: a guess, never a
    result). libcst and the catalogue are loaded first, so
    that the workers inherit them instead of loading them each."""
    from migrator.engine.discover import Candidate, discover
    from migrator.engine.runner import worker_pool  # (looked up there: tests count the pools)

    workers = jobs or (os.cpu_count() or 1)
    python = (c for c in discover(root, paths, None) if isinstance(c, Candidate) and c.kind == "python")
    if workers < 2 or sum(1 for _ in itertools.islice(python, EARLY_MIN_PYTHON_FILES)) < EARLY_MIN_PYTHON_FILES:
        yield None
        return
    from migrator.catalogue.loader import load_catalogue
    from migrator.fix import python_fixer  # noqa: F401 - imported once here, not once per forked worker

    load_catalogue()
    with worker_pool(workers) as pool:
        yield pool


def fix_modules(jobs: Sequence[PythonJob], workers: int = 0, progress: Callable[[int, int], None] | None = None,
                pool: WorkerPool | None = None, spool: Spool | None = None) -> list[PythonOutcome]:
    """One outcome per job, in order; in a pool when there is enough work and more than one CPU (`pool`,
    started ahead by `early_workers`, else one started here). `progress(done, total)` after each module;
    `spool`: where each changed text goes as it arrives (`fix/spool.py`)."""
    from migrator.engine.runner import worker_pool  # (looked up there: tests count the pools)

    def tick(done: int) -> None:
        if progress:
            progress(done, len(jobs))

    tick(0)
    workers = min(workers or (os.cpu_count() or 1), len(jobs))
    big = len(jobs) >= POOL_MIN_FILES and sum(len(j.text) for j in jobs) >= POOL_MIN_BYTES
    if (workers < 2 and pool is None) or not big:
        outcomes = []
        for job in jobs:
            outcomes.append(_outcome(job, _fix_one(job), spool))
            tick(len(outcomes))
        return outcomes
    # largest modules first, so that one big module does not start last and run alone
    order = sorted(range(len(jobs)), key=lambda i: -len(jobs[i].text))
    import migrator.fix.python_fixer  # noqa: F401 - imported once here, not once per forked worker
    results: dict[int, PythonOutcome] = {}
    with contextlib.ExitStack() as stack:
        running = pool or stack.enter_context(worker_pool(workers))
        for i, got in zip(order, running.map(_fix_one, [jobs[i] for i in order])):
            results[i] = _outcome(jobs[i], got, spool)
            tick(len(results))
    return [results[i] for i in range(len(jobs))]
