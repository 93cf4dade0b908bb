"""The fix transaction, end to end, as one object with named steps (`FixTransaction.run`):

1. `prepare`  — one writing run per tree (the journal lock), stale temporary files swept, a killed
                run's journal recovered (its files and record made to match first);
2. `scan`     — the tree as it is (`pipeline/scan.py`), remembered for the rescan;
3. `plan`     — every file fixed, re-parsed and encoded before any write (`fix/runner.py`), plus the
                framework route's own edits (MindSpeed adaptor import and pin);
4. `preview`  — (--diff/--check) the planned texts scanned in place of the files: a fresh scan's
                results without writing, for the same SoC, coverage table, census and markers;
   or `write` — the journal first, then each file only if it still has the planned-from bytes
                (`fix/transaction.py`);
5. `rescan`   — the written tree, reusing the results of the files fix left alone;
6. `record`   — the merged fix record (`fix/ledger.py`), then the journal goes.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from migrator.fix.choices import FixChoices
from migrator.ground import declines
from migrator.ground.config import TARGETS, Settings
from migrator.ground.model import RunResult
from migrator.ground.progress import Progress, phase, prefixed
from migrator.ground.usage_error import UsageError
from migrator.pipeline.options import scan_options, selector
from migrator.pipeline.scan import TreeScan, scan_tree

if TYPE_CHECKING:  # the fixer (libcst) is imported when a fix runs, not with the api
    from migrator.engine.workers import WorkerPool
    from migrator.fix.runner import FileChange, FixPlan

@dataclass(frozen=True)
class FixRequest(FixChoices):
    """What the caller asked `fix` to do (the CLI's flags): the rewrites, and where they go."""

    write: bool = True  # False: compute the changes only (--diff/--check)
    out_dir: Path | None = None  # write a full copy there; the tree is left alone
    record: bool = True  # journal and fix record


@dataclass(frozen=True)
class FixOutcome:
    """What `fix` did: per-file changes, where it wrote, and the findings that remain."""

    plan: FixPlan  # as written (a file that could not be written has its error)
    written_to: Path | None
    record: Path | None
    remaining: RunResult
    record_error: str | None = None

    @property
    def changed_files(self) -> list[str]:
        return [c.path for c in self.plan.changes if c.changed]

    @property
    def errors(self) -> list[tuple[str, str]]:
        errors = [(c.path, c.error) for c in self.plan.changes if c.error]
        return errors + ([(".migrate/fix-record.json", self.record_error)] if self.record_error else [])


def _return_freed_memory() -> None:
    """Give the C heap's free pages back to the system (glibc's `malloc_trim`): the scan's file bytes
    are freed by now but, freed amid the heap, they stay resident (61 of the 95 MiB the scan of
    3,795 files added), and a worker forked later would hold them too."""
    import ctypes  # here: every command imports this module

    try:
        ctypes.CDLL(None).malloc_trim(0)
    except (OSError, AttributeError):  # not glibc: nothing to give back this way
        pass


class _PlannedBytes(Mapping[str, bytes]):
    """Each changed file's planned bytes by its path (and real path), read from the plan when asked:
    the plan keeps them in its spool, not in memory (`fix/spool.py`)."""

    def __init__(self, plan: FixPlan):
        self.changes: dict[str, FileChange] = {}
        for change in plan.changes:
            if change.changed:
                self.changes[change.path] = self.changes[change.real_path] = change

    def __getitem__(self, rel: str) -> bytes:
        change = self.changes[rel]
        encoded = change.encoded
        return encoded if encoded is not None else change.after.encode("utf-8")

    def __iter__(self) -> Iterator[str]:
        return iter(self.changes)

    def __len__(self) -> int:
        return len(self.changes)


def _check_out(root: Path, out: Path) -> None:
    """`--out` is a new (or empty) folder outside the tree: a copy into the tree would be scanned and
    fixed with it, and onto the tree is no copy at all."""
    real_root, real_out = root.resolve(), out.resolve()
    if real_out == real_root or real_out.is_relative_to(real_root):
        raise UsageError(f"--out {out}: is the tree being fixed or inside it ({root}); choose a folder outside it")


class FixTransaction:
    """One `migrate fix` over `paths` (absolute) under `settings`."""

    def __init__(self, settings: Settings, paths: list[Path], request: FixRequest, progress: Progress | None = None):
        if request.target not in TARGETS:
            raise UsageError(f"unknown target {request.target!r}: choose {' or '.join(TARGETS)}")
        self.settings = replace(settings, target=request.target)  # each rule's precheck is judged for this target
        self.paths = paths
        self.request = request
        self.progress = progress
        self.memo: dict = {}  # the rescan after writing reuses the results of the files fix left alone

    def run(self) -> FixOutcome:
        with contextlib.ExitStack() as lock:
            if self.request.write:
                self.prepare(lock)
            from migrator.fix.pool import early_workers

            # started before the scan: forked later, each worker would hold a copy of what the scan left here
            with early_workers(self.settings.jobs, self.settings.root, self.paths) as pool:
                before = self.scan()
                _return_freed_memory()
                plan = self.plan(before, pool)
            _return_freed_memory()  # before the preview's or the rescan's workers are forked
            if not self.request.write:
                return self.preview(plan)
            plan = self.write(plan)
            rescan_root, rescan_paths, remaining = self.rescan(plan)
            return self.record(plan, rescan_root, rescan_paths, remaining)

    def prepare(self, lock: contextlib.ExitStack) -> None:
        from migrator.fix import journal, ledger
        from migrator.fix.writer import UnsafeWrite, sweep_stale_temps

        root, out = self.settings.root, self.request.out_dir
        if out is not None:
            _check_out(root, out)
        try:
            if self.request.record:
                ledger.check_location(out or root)
                if out is None:  # one writing run per tree: a second one would take the first's journal
                    lock.enter_context(journal.exclusive(root))
        except UnsafeWrite as exc:
            raise UsageError(str(exc)) from None
        except OSError as exc:  # e.g. a folder the user may not write: no journal is involved yet
            raise UsageError(f"{exc.filename or root / journal.LOCK_PATH}: cannot take the fix lock "
                             f"({exc.strerror or exc}); nothing was written") from None
        try:
            if out is None:  # --out leaves the original tree alone, stale files included
                sweep_stale_temps(root, tree_locked=self.request.record)
                journal.recover(root)
        except UnsafeWrite as exc:
            raise UsageError(str(exc)) from None
        except OSError as exc:
            raise UsageError(f"{root / journal.JOURNAL_PATH}: cannot complete the interrupted fix's "
                             f"record ({exc.strerror or exc}); nothing was written") from None

    def scan(self) -> TreeScan:
        return scan_tree(self.settings, self.paths, self.progress, self.memo)

    def plan(self, before: TreeScan, pool: WorkerPool | None = None) -> FixPlan:
        from migrator.fix.runner import FixOptions, plan_fixes

        request, settings = self.request, self.settings
        extra = {f.path for f in before.result.findings}
        if request.annotate or request.strip_annotations:
            extra |= self._scanned_sources()
        options = FixOptions.of(request, jobs=settings.jobs, scan=scan_options(settings, before.training_dtypes))
        # what a framework route covers is not rewritten: the framework handles it at run time
        result = before.result
        to_fix = replace(result, findings=tuple(f for f in result.findings if not (f.route and f.route.absorbs)))
        plan = plan_fixes(to_fix, settings.root, options, extra_files=extra, progress=phase(self.progress, "fixing"),
                          context=result.findings, pool=pool)
        if settings.route == "none" or not result.frameworks:
            return plan
        from migrator.routes.fix import add_route_edits

        # what the adaptor patches is left unrewritten (with `--route auto` too), so the adaptor must be there
        return add_route_edits(plan, result, settings.route, self.paths, settings.exclude, settings.target)

    def preview(self, plan: FixPlan) -> FixOutcome:
        """The findings a fresh scan of the planned files would give, nothing written."""
        remaining = scan_tree(self.settings, self.paths, prefixed(self.progress, "re-"), self.memo,
                              _PlannedBytes(plan)).result
        return FixOutcome(plan, None, None, declines.declined_are_manual(remaining, plan))

    def write(self, plan: FixPlan) -> FixPlan:
        from migrator.fix.transaction import write_changes

        return write_changes(plan, self.request.out_dir, with_journal=self.request.record)

    def rescan(self, plan: FixPlan) -> tuple[Path, list[Path], RunResult]:
        root = self.settings.root
        rescan_root = self.request.out_dir or root
        rescan_paths = [rescan_root / p.relative_to(root) if p.is_relative_to(root) else p for p in self.paths]
        rescanned = scan_tree(replace(self.settings, root=rescan_root), rescan_paths, prefixed(self.progress, "re-"),
                              self.memo)
        return rescan_root, rescan_paths, declines.declined_are_manual(rescanned.result, plan)

    def record(self, plan: FixPlan, rescan_root: Path, rescan_paths: list[Path], remaining: RunResult) -> FixOutcome:
        if not self.request.record:
            return FixOutcome(plan, rescan_root, None, remaining)
        from migrator.fix import journal, ledger
        from migrator.fix.transaction import record_run

        try:
            covered = ledger.scanned_by(selector(self.settings), rescan_root, rescan_paths)
            return FixOutcome(plan, rescan_root, record_run(plan, rescan_root, remaining, covered), remaining)
        except OSError as exc:
            error = f"cannot write the fix record: {exc.strerror or exc}"
            if (rescan_root / journal.JOURNAL_PATH).is_file():
                error += f"; this run's edits are kept in {journal.JOURNAL_PATH} and recorded by the next `migrate fix`"
            return FixOutcome(plan, rescan_root, None, remaining, error)

    def _scanned_sources(self) -> set[str]:
        from migrator.engine.discover import Candidate, discover

        return {c.rel for c in discover(self.settings.root, self.paths, None)
                if isinstance(c, Candidate) and c.kind in ("python", "shell")}
