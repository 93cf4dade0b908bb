"""Writing a planned fix and its record as one transaction (see migrator/fix/journal.py): the journal
first, then each file — only if it still has the bytes it was planned from — then the record."""

from __future__ import annotations

import os
import shutil
import stat
from collections import Counter
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from migrator import __version__
from migrator.catalogue.loader import load_catalogue
from migrator.fix import journal, ledger
from migrator.fix.runner import FileChange, FixPlan
from migrator.fix.writer import ChangedSincePlanned, atomic_write, destination
from migrator.ground.fix_record import Decline, FileEntry, FileError, FixRecord, RuntimeModule, ToolStamp
from migrator.ground.model import RunResult


def _unchanged_since_planned(path: Path, change: FileChange) -> Callable[[], None]:
    """Checked right before the rename: the user's edit (or rename) made while fix ran always wins."""
    creates = change.runtime_module and not change.before

    def check() -> None:
        try:
            mode = os.lstat(path).st_mode
        except FileNotFoundError:
            if creates:
                return
            raise ChangedSincePlanned("gone since planned (renamed or deleted while fix ran); not recreated") from None
        if creates:
            raise ChangedSincePlanned("a file appeared there while fix ran; left as it is")
        if not stat.S_ISREG(mode):
            raise ChangedSincePlanned("no longer a regular file since planned; left as it is")
        if ledger.sha256(path.read_bytes()) != change.before_sha256:
            raise ChangedSincePlanned("changed since planned (edited while fix ran); your version is kept")

    return check


def _journalled(plan: FixPlan, root: Path) -> list[dict[str, Any]]:
    writes = [c for c in plan.changes if c.changed and c.encoded is not None]
    edited_before = journal.recorded_text(root, {c.real_path for c in writes})
    return [{"path": c.real_path, "before": c.before_sha256, "after": ledger.sha256(c.encoded or b""),
             **({"before_text": c.before} if c.real_path in edited_before else {})} for c in writes]


def write_changes(plan: FixPlan, out_dir: Path | None, *, with_journal: bool = False) -> FixPlan:
    """Write every planned change (in place, or into a full copy under out_dir), each atomically and
    only inside the root; a file that cannot be written, or that changed since it was planned, gets
    its error, the others are still written. `with_journal`: the journal goes first (no file is
    written when it cannot be). Returns the plan as it now stands on disk."""
    target_root = out_dir or plan.root
    if out_dir is not None:
        _copy_tree(plan.root, out_dir)
    if with_journal:
        try:
            journal.begin(target_root, fix_record(plan), _journalled(plan, target_root))
        except OSError as exc:
            why = f"not written: the fix journal could not be written ({exc.strerror or exc}); file left unchanged"
            return replace(plan, changes=tuple(replace(c, error=why) if c.changed else c for c in plan.changes))
    done = []
    failed_modules: dict[str, str] = {}
    written = 0
    # runtime modules first: a file whose module could not be written is not written either
    for change in sorted(plan.changes, key=lambda c: not c.runtime_module):
        encoded = change.encoded
        if change.changed and encoded is None:  # never an empty file for a change nobody encoded
            change = replace(change, error="internal error: the fixed text was not encoded; file left unchanged")
        elif change.changed and change.imports_module in failed_modules:
            why = failed_modules[change.imports_module]
            change = replace(change, error=f"not written: it would import {change.imports_module}, which could not "
                                           f"be written ({why}); file left unchanged")
        elif change.changed and encoded is not None:
            try:
                path = destination(target_root, change.real_path)
                atomic_write(path, encoded, before_replace=_unchanged_since_planned(path, change))
                written += 1
                journal.fault_point(f"file:{written}")
            except ChangedSincePlanned as exc:
                change = replace(change, error=str(exc))
                if change.runtime_module:
                    failed_modules[change.path] = str(exc)
            except OSError as exc:
                why = exc.strerror if exc.strerror else str(exc)
                change = replace(change, error=f"cannot write: {why}; file left unchanged")
                if change.runtime_module:
                    failed_modules[change.path] = why
        done.append(change)
    journal.fault_point("written")
    done.sort(key=lambda c: c.path)
    return replace(plan, changes=tuple(done))


def record_run(plan: FixPlan, root: Path, remaining: RunResult, covered: Callable[[str, str], bool]) -> Path:
    """Merge this (written) run into the fix record at `root` (see migrator/fix/ledger.py): the commit."""
    states: dict[str, ledger.FileState] = {}
    for c in plan.changes:
        if not c.before_sha256:
            continue  # never read: the ledger looks at the file itself
        after, digest = (c.after, ledger.sha256(c.encoded or b"")) if c.changed else (c.before, c.before_sha256)
        if c.changed or c.real_path not in states:
            states[c.real_path] = ledger.FileState(c.before, c.before_sha256, after, digest)
    counts = Counter((f.path, f.code, f.symbol) for f in remaining.findings)
    path = ledger.write(root, fix_record(plan), states, counts, covered)
    journal.fault_point("record")
    journal.finish(root)
    return path
def fix_record(plan: FixPlan) -> FixRecord:
    """This run alone, paths relative to the root; `ledger.merge` folds it into the earlier runs."""
    return FixRecord(
        tool=ToolStamp(name="ascend-migrate", version=__version__, catalogue=load_catalogue().digest),
        target=plan.options.target,
        files=tuple(FileEntry(path=c.real_path, edits=tuple(e.to_record() for e in c.edits))
                    for c in plan.changes if c.changed and c.edits),
        # sites the fixer would not rewrite, with the reason: `migrate scan` reports them as manual
        declined=tuple(Decline(c.path, f.code, f.symbol, why) for c in plan.changes for f, why in c.declined),
        errors=tuple(FileError(c.path, c.error) for c in plan.changes if c.error),
        # modules the fix itself wrote (`_migrate_runtime.py`): a later run may replace them while unedited
        runtime_modules=tuple(RuntimeModule(c.real_path, ledger.sha256(c.encoded or b""))
                              for c in plan.changes if c.runtime_module and c.changed),
    )


def _copy_tree(root: Path, out_dir: Path) -> None:
    if out_dir.exists() and any(out_dir.iterdir()):
        raise FileExistsError(f"{out_dir}: output folder exists and is not empty; choose a new folder")
    ignore = shutil.ignore_patterns(".git", "__pycache__", ".migrate", "*.pyc", ".venv*")
    real_out = out_dir.resolve()

    def _ignore(folder: str, names: list[str]) -> set[str]:
        skipped = set(ignore(folder, names))
        for name in names:
            if (Path(folder) / name).resolve() == real_out:
                skipped.add(name)
        return skipped

    shutil.copytree(root, out_dir, symlinks=True, ignore=_ignore, dirs_exist_ok=True)
