"""Fix Python modules in parallel: libcst is pure Python, so a big tree is fixed one module per worker.

Workers are the scan's (`engine.runner.worker_pool`: they never outlive the caller). A worker gets
(text, findings, target, entry point) and returns the new text with the *indices* of the findings it
applied or declined, so the caller keeps its own Finding objects. A module the fixer raised on is an
error of that module only, as in the serial path.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from migrator.fix.import_order import ImportStyle
from migrator.fix.runtime_module import RuntimeImport
from migrator.ground.model import Finding

# below this much Python source a pool costs more (worker start, libcst import) than it saves
POOL_MIN_BYTES = 400_000
POOL_MIN_FILES = 4


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
    text: str
    applied: list[Finding]
    declined: list[tuple[Finding, str]]
    error: str | None = None
    runtime_names: frozenset[str] = frozenset()


@dataclass(frozen=True)
class _Indexed:
    text: str
    applied: tuple[int, ...]
    declined: tuple[tuple[int, str], ...]
    error: str | None
    runtime_names: frozenset[str] = frozenset()


def _fix_one(job: PythonJob) -> _Indexed:
    from migrator.catalogue.loader import load_catalogue
    from migrator.fix.python_fixer import fix_python

    try:
        result = fix_python(job.text, list(job.findings), load_catalogue().rules, job.target, job.entry_point, job.runtime, job.style,
                            job.context, job.torch_autoload)
        index = {id(f): i for i, f in enumerate(job.findings)}
        return _Indexed(
            result.text,
            tuple(index[id(f)] for f in result.applied),
            tuple((index[id(f)], why) for f, why in result.declined),
            None,
            result.runtime_names,
        )
    except Exception as exc:  # noqa: BLE001 - one bad file never stops the run
        return _Indexed(job.text, (), (), f"internal fixer error ({exc.__class__.__name__}: {exc}); file left unchanged")


def _outcome(job: PythonJob, got: _Indexed) -> PythonOutcome:
    return PythonOutcome(
        got.text, [job.findings[i] for i in got.applied], [(job.findings[i], why) for i, why in got.declined], got.error,
        got.runtime_names,
    )


def fix_modules(jobs: Sequence[PythonJob], workers: int = 0,
                progress: Callable[[int, int], None] | None = None) -> list[PythonOutcome]:
    """One outcome per job, in order; in a pool when there is enough work and more than one CPU.
    `progress(done, total)` after each module."""
    from migrator.engine.runner import worker_pool

    def tick(done: int) -> None:
        if progress:
            progress(done, len(jobs))

    tick(0)
    workers = min(workers or (os.cpu_count() or 1), len(jobs))
    big = len(jobs) >= POOL_MIN_FILES and sum(len(j.text) for j in jobs) >= POOL_MIN_BYTES
    if workers < 2 or not big:
        outcomes = []
        for job in jobs:
            outcomes.append(_outcome(job, _fix_one(job)))
            tick(len(outcomes))
        return outcomes
    # largest modules first, so that one big module does not start last and run alone
    order = sorted(range(len(jobs)), key=lambda i: -len(jobs[i].text))
    import migrator.fix.python_fixer  # noqa: F401 - imported once here, not once per forked worker
    results: dict[int, _Indexed] = {}
    with worker_pool(workers) as pool:
        for i, got in zip(order, pool.map(_fix_one, [jobs[i] for i in order])):
            results[i] = got
            tick(len(results))
    return [_outcome(job, results[i]) for i, job in enumerate(jobs)]
