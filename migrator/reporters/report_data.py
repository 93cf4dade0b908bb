"""Everything the reviewer report shows besides the scan itself, gathered once (I/O lives here).

`gather()` reads the flagged files back (for excerpts; a notebook's cells as their own lines,
since its findings' lines count within a cell), asks git for the commit, and loads the
optional fix record (written by `migrate fix`) and validation result (written by
`migrate validate`), checking them against `migrator/ground/schema/*.schema.json`. The renderers in
`migrator.reporters.report` are then pure functions of the returned `ReportData`.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from migrator.engine.scanned_lines import CellLines, SourceLines
from migrator.ground.jsonfile import read_json
from migrator.ground.model import RunResult
from migrator.ground.report_documents import PlanDocument, ValidationDocument
from migrator.reporters.report_paths import root_label

DEFAULT_FIX_RECORD = ".migrate/fix-record.json"


class ReportDataError(ValueError):
    """A file given to the report is missing or does not match its schema (exit 2; names the file)."""


@dataclass(frozen=True)
class Meta:
    repo: str
    root: str  # absolute, for reading files; the page shows root_label
    date: str
    target: str = "npu"
    soc: str = "A2"
    commit: str | None = None
    branch: str | None = None
    dirty: bool = False
    root_label: str = ""  # the root as the page names it: no absolute path of this machine


@dataclass(frozen=True)
class AppliedEdit:
    path: str
    code: str
    fix_kind: str | None
    title: str
    symbol: str
    line: int | None  # where the replacement is now (new.line, else original.line)
    original_line: int | None
    cell: int | None = None  # notebooks: the edited cell (1-based); the lines count within it


@dataclass(frozen=True)
class AppliedFixes:
    """What the report shows of a fix record (`migrator.ground.fix_record.FixRecord`): its edits, paths made
    relative to the scanned root."""

    source: str
    target: str | None
    edits: tuple[AppliedEdit, ...]
    files: tuple[str, ...]


@dataclass(frozen=True)
class ReportData:
    result: RunResult
    meta: Meta
    sources: Mapping[str, tuple[str, ...] | None] = field(default_factory=dict)
    # notebooks with cell findings: path -> cell -> that cell's source lines (findings' lines count in it)
    cells: Mapping[str, Mapping[int, tuple[str, ...]]] = field(default_factory=dict)
    diffs: Mapping[str, str] | None = None  # path -> unified diff text
    diffs_applied: bool = False
    fix_record: AppliedFixes | None = None
    validation: ValidationDocument | None = None
    validation_source: str | None = None
    plan: PlanDocument | None = None  # `migrate plan -o` document (plan.schema.json)
    plan_source: str | None = None
    notes: tuple[str, ...] = ()  # warnings shown at the top of the report
    census: Any = None  # migrator.census.Census from .migrate/op-trace.json, when present


def _git(root: Path, *args: str) -> str | None:
    from migrator.ground.git_command import run_git

    proc = run_git(list(args), root, filters=args[:1] == ("status",), timeout=10)
    return proc.stdout.decode("utf-8", "replace").strip() if proc is not None and proc.returncode == 0 else None


def git_info(root: Path) -> dict[str, Any]:
    if _git(root, "rev-parse", "--is-inside-work-tree") != "true":
        return {}
    top = _git(root, "rev-parse", "--show-toplevel")
    commit = _git(root, "rev-parse", "HEAD")
    branch = _git(root, "rev-parse", "--abbrev-ref", "HEAD")
    status = _git(root, "status", "--porcelain", "--untracked-files=no", "--ignore-submodules=all")
    return {
        "repo": Path(top).name if top else None,
        "top": top,
        "commit": commit,
        "branch": branch if branch and branch != "HEAD" else None,
        "dirty": bool(status),
    }


def report_date(now: datetime | None = None) -> str:
    """UTC, minutes; `SOURCE_DATE_EPOCH` (reproducible builds) wins over the clock."""
    epoch = os.environ.get("SOURCE_DATE_EPOCH")
    if now is None and epoch and epoch.isdigit():
        now = datetime.fromtimestamp(int(epoch), tz=timezone.utc)
    now = now or datetime.now(timezone.utc)
    return now.astimezone(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")


def _load_checked(path: str | Path, what: str, schema: str, root: Path | None = None) -> Any:
    """A JSON file of ours, validated against `migrator/ground/schema/<schema>`; clear errors naming the file
    (also when it resolves outside ``root``, where one is given)."""
    from migrator.ground.schema_check import SchemaMismatch, check

    path = Path(path)
    data = read_json(path, what, ReportDataError, root=root)
    try:
        check(data, schema)
    except SchemaMismatch as exc:
        raise ReportDataError(f"{path}: does not match the {what} schema (migrator/ground/schema/{schema}): {exc}") from None
    return data


def load_validation(path: str | Path) -> ValidationDocument:
    return ValidationDocument(_load_checked(path, "validation result", "validation.schema.json"))


def load_plan(path: str | Path) -> PlanDocument:
    return PlanDocument(_load_checked(path, "plan", "plan.schema.json"))


def load_fix_record(path: str | Path, scan_root: Path, confined: bool = False) -> AppliedFixes:
    """The record's edits for the report; unknown keys are ignored (the schema says so: a newer tool's
    record still shows), anything else that does not fit is a ReportDataError naming the file and field.
    ``confined`` (the record found in the root, not one the user named): never read through a link out
    of the root."""
    from migrator.ground.fix_record import FixRecordError, load

    path = Path(path)
    try:
        record = load(path, scan_root if confined else None, extra_keys="ignore")
    except FixRecordError as exc:
        raise ReportDataError(str(exc)) from None
    record_root = Path(record.root) if record.root else None
    edits: list[AppliedEdit] = []
    files: list[str] = []
    for entry in record.files:
        rel = entry.path
        if record_root is not None and record_root.is_absolute():
            try:
                rel = (record_root / rel).resolve().relative_to(scan_root.resolve()).as_posix()
            except (ValueError, OSError):
                pass
        files.append(rel)
        for e in entry.edits:
            original_line = e.original.line if e.original is not None else None
            edits.append(
                AppliedEdit(
                    path=rel,
                    code=e.code,
                    fix_kind=e.fix_kind,
                    title=e.title or "",
                    symbol=e.symbol or "",
                    line=e.block_line if e.block_line is not None else original_line,
                    original_line=original_line,
                    cell=e.cell,
                )
            )
    edits.sort(key=lambda e: (e.path, e.cell or 0, e.line or 0, e.code))
    return AppliedFixes(source=str(path), target=record.target, edits=tuple(edits), files=tuple(files))


def gather(
    result: RunResult,
    *,
    target: str = "npu",
    soc: str = "A2",
    fix_record: str | Path | None = None,
    validation: str | Path | None = None,
    diffs: Mapping[str, str] | None = None,
    diffs_applied: bool = False,
    now: datetime | None = None,
    plan: str | Path | None = None,
) -> ReportData:
    root = Path(result.summary.root)
    notes: list[str] = []
    record = None
    if fix_record is not None:
        record = load_fix_record(fix_record, root)
    elif os.path.lexists(root / DEFAULT_FIX_RECORD):
        try:
            record = load_fix_record(root / DEFAULT_FIX_RECORD, root, confined=True)
        except ReportDataError as exc:
            notes.append(f"fix record ignored: {exc}")
    validation_data = load_validation(validation) if validation is not None else None
    plan_data = load_plan(plan) if plan is not None else None
    from migrator.census.store import load_for_root

    census, census_problem = load_for_root(root)
    if census_problem:
        notes.append(census_problem)
    git = git_info(root)
    meta = Meta(
        repo=git.get("repo") or root.name or str(root),
        root=str(root),
        date=report_date(now),
        target=target,
        soc=result.summary.coverage.soc if result.summary.coverage else soc,
        commit=git.get("commit"),
        branch=git.get("branch"),
        dirty=bool(git.get("dirty")),
        root_label=root_label(str(root), git.get("top")),
    )
    lines_of = SourceLines(root)
    paths = sorted({f.path for f in result.findings} | set(diffs or {}))
    sources = {p: (tuple(lines) if (lines := lines_of(p)) is not None else None) for p in paths}
    cell_lines = CellLines(lines_of)
    cells = {}
    for p in sorted({f.path for f in result.findings if f.cell is not None}):
        view = cell_lines.notebook(p)
        if view is not None:
            cells[p] = {n: tuple(lines) for n, lines in view.cells.items()}
    return ReportData(
        result=result,
        meta=meta,
        sources=sources,
        cells=cells,
        diffs=dict(diffs) if diffs else None,
        diffs_applied=diffs_applied,
        fix_record=record,
        validation=validation_data,
        validation_source=str(validation) if validation is not None else None,
        plan=plan_data,
        plan_source=str(plan) if plan is not None else None,
        notes=tuple(notes),
        census=census,
    )
