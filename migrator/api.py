"""The programmatic interface: every function returns data and never prints.

    from migrator import api
    result = api.scan(["path/to/repo"])           # RunResult
    print(result.summary.by_family)
"""

from __future__ import annotations

import contextlib
import errno
import os
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from migrator import __version__, declines
from migrator.catalogue.loader import Rule, load_catalogue
from migrator.config import ConfigError, Settings, find_root, load_settings
from migrator.model import Finding, RunResult, Summary, ToolInfo, finding_counts
from migrator.progress import Progress, phase, prefixed
from migrator.usage_error import UsageError

MAX_LISTED_MARKERS = 200


def resolve_settings(paths: Sequence[str | Path], root: str | Path | None = None, **overrides) -> tuple[Settings, list[Path]]:
    resolved = []
    for p in paths or ["."]:
        path = Path(p)
        if not path.exists() and not path.is_symlink():
            raise UsageError(f"{p}: no such file or directory")
        if path.is_symlink() and _is_link_loop(path):
            raise UsageError(f"{p}: a symlink loop (following it leads back to itself); nothing to scan")
        resolved.append(path.absolute())
    root_path = Path(root).absolute() if root else find_root(resolved)
    settings = load_settings(root_path).with_overrides(**overrides)
    _check_coverage_choice(settings)
    return settings, resolved


def _is_link_loop(path: Path) -> bool:
    try:
        os.stat(path)
    except OSError as exc:
        return exc.errno == errno.ELOOP
    return False


def _check_coverage_choice(settings: Settings) -> None:
    from migrator.coverage import CoverageError, available_versions, socs

    try:
        versions = available_versions()
        if settings.torch_npu_version and settings.torch_npu_version not in versions:
            raise UsageError(
                f"unknown torch-npu version {settings.torch_npu_version!r}; coverage tables shipped: {', '.join(versions)}"
            )
        valid_socs = socs(settings.torch_npu_version)
    except CoverageError as exc:
        raise UsageError(str(exc)) from None
    if settings.soc not in valid_socs:
        raise UsageError(f"unknown SoC {settings.soc!r}; choose one of {', '.join(valid_socs)}")


def scan(
    paths: Sequence[str | Path],
    settings: Settings | None = None,
    progress: Progress | None = None,
    memo: dict | None = None,
    **overrides,
) -> RunResult:
    """Scan files and folders; findings are sorted by path, line and column. `memo`: an empty dict
    shared by several scans of one command, so that unchanged files are scanned once."""
    from migrator.engine.runner import run

    if settings is None:
        settings, resolved = resolve_settings(paths, **overrides)
    else:
        resolved = [Path(p).absolute() for p in paths]
    catalogue = load_catalogue()
    _check_codes(settings.select + settings.ignore, catalogue.rules)
    output = run(settings, resolved, phase(progress, "scanning"), memo=memo)
    findings = tuple(sorted((f for r in output.files for f in r.findings), key=Finding.sort_key))
    markers = tuple(m for r in output.files for m in r.markers)
    summary = summarize(
        settings.root.as_posix(),
        files_scanned=sum(1 for r in output.files if not r.skipped),
        files_skipped=len(output.skipped),
        findings=findings,
        suppressed=sum(r.suppressed for r in output.files),
        markers=markers,
    )
    ops = tuple(op for r in output.files for op in r.ops)
    coverage_on = any(settings_selector(settings).enabled(r.code, r.default_enabled) for r in catalogue.by_family("coverage"))
    summary = replace(summary, coverage=coverage_summary(ops, settings) if coverage_on else None)
    tool = ToolInfo("ascend-migrate", __version__, catalogue.digest, coverage_table_name(settings))
    result = RunResult(tool=tool, summary=summary, findings=findings, skipped=output.skipped)
    return _apply_route(declines.mark_manual(result, declines.recorded(settings.root)), settings, resolved)


def _apply_route(result: RunResult, settings: Settings, paths: list[Path]) -> RunResult:
    """Framework routes (migrator/routes): `--route none` leaves the result as the rules made it; a framework
    is detected from the scanned paths only."""
    if settings.route == "none":
        return result
    from migrator.routes import CHOICES, apply_routes
    from migrator.routes.table import RouteTableError

    if settings.route not in CHOICES:
        raise UsageError(f"unknown route {settings.route!r}; choose one of {', '.join(CHOICES)}")
    try:
        return apply_routes(result, settings.root, settings.route, paths, settings.exclude)
    except RouteTableError as exc:
        raise UsageError(str(exc)) from None


def settings_selector(settings: Settings):
    from migrator.config import RuleSelector

    return RuleSelector(settings.select, settings.ignore)


def coverage_table_name(settings: Settings) -> str | None:
    from migrator.coverage import CoverageError, default_version

    try:
        return f"torch-npu {settings.torch_npu_version or default_version()}"
    except CoverageError:
        return None


MAX_OP_SITES = 20


def _site(op) -> str:
    """`path:line`, or `path:cell N:line` for a notebook (whose lines count within the cell)."""
    return f"{op.path}:cell {op.cell}:{op.line}" if op.cell is not None else f"{op.path}:{op.line}"


def coverage_summary(ops, settings: Settings) -> dict[str, Any]:
    """Distinct torch ops used, with status and call sites, for the summary and the report."""
    by_name: dict[str, list] = {}
    for op in ops:
        by_name.setdefault(op.name, []).append(op)
    from migrator.coverage import CoverageError, lookup, runs_as, status_reason

    rows = []
    for name in sorted(by_name):
        sites = by_name[name]
        first = sites[0]
        try:  # the table's facts behind the status: what the op runs as, which limit makes it partial
            entry = lookup(name, soc=settings.soc, version=settings.torch_npu_version)
            facts = {"runs_as": runs_as(entry), "why": status_reason(entry) if entry.status == first.status else ""}
        except CoverageError:
            facts = {"runs_as": "", "why": ""}
        rows.append({
            "name": name,
            "status": first.status,
            "dtypes": list(first.dtypes),
            "npu_name": first.npu_name,
            "count": len(sites),
            "sites": [_site(s) for s in sites[:MAX_OP_SITES]],
            **facts,
        })
    by_status = Counter(r["status"] for r in rows)
    from migrator.coverage import STATUSES

    return {
        "soc": settings.soc,
        "torch_npu_version": (coverage_table_name(settings) or "").replace("torch-npu ", ""),
        "distinct_ops": len(rows),
        "by_status": {s: by_status.get(s, 0) for s in STATUSES},
        "ops": rows,
    }


@dataclass(frozen=True)
class FixOutcome:
    """What `fix` did: per-file changes, where it wrote, and the findings that remain."""

    plan: Any  # migrator.fix.runner.FixPlan, as written (a file that could not be written has its error)
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


def fix(
    paths: Sequence[str | Path],
    settings: Settings | None = None,
    *,
    target: str = "npu",
    exact_only: bool = False,
    annotate: bool = False,
    strip_annotations: bool = False,
    write: bool = True,
    out_dir: str | Path | None = None,
    record: bool = True,
    progress: Progress | None = None,
    **overrides,
) -> FixOutcome:
    """Rewrite what can be rewritten, as a transaction over the tree: every file is planned (fixed,
    re-parsed, encoded) before any is written; a file that cannot be planned or written is an error
    of that file only. `write=False` computes the changes only (for --diff/--check)."""
    from migrator.fix import journal, ledger
    from migrator.fix.runner import FixOptions, plan_fixes
    from migrator.fix.transaction import record_run, write_changes
    from migrator.fix.writer import UnsafeWrite, sweep_stale_temps

    if settings is None:
        settings, resolved = resolve_settings(paths, **overrides)
    else:
        resolved = [Path(p).absolute() for p in paths]
    if target not in ("npu", "portable"):
        raise UsageError(f"unknown target {target!r}: choose npu or portable")
    settings = replace(settings, target=target)  # fixability (each rule's precheck) is judged for this target
    out = Path(out_dir).absolute() if out_dir else None
    with contextlib.ExitStack() as lock:
        if write:
            try:
                if record:
                    ledger.check_location(out or settings.root)
                    if out is None:  # one writing run per tree: a second one would take the first's journal
                        lock.enter_context(journal.exclusive(settings.root))
                if out is None:  # --out leaves the original tree alone, stale files included
                    sweep_stale_temps(settings.root)
                    journal.recover(settings.root)  # a killed run's files and record made to match first
            except UnsafeWrite as exc:
                raise UsageError(str(exc)) from None
            except OSError as exc:
                raise UsageError(f"{settings.root / journal.JOURNAL_PATH}: cannot complete the interrupted fix's "
                                 f"record ({exc.strerror or exc}); nothing was written") from None
        memo: dict = {}  # the rescan after writing reuses the results of the files fix left alone
        before = scan(resolved, settings=settings, progress=progress, memo=memo)
        extra = {f.path for f in before.findings}
        if annotate or strip_annotations:
            extra |= _scanned_sources(settings, resolved)
        options = FixOptions(target=target, exact_only=exact_only, annotate=annotate, strip_annotations=strip_annotations,
                             jobs=settings.jobs)
        # what a framework route covers is not rewritten: the framework handles it at run time
        to_fix = replace(before, findings=tuple(f for f in before.findings if not (f.route and f.route.absorbs)))
        plan = plan_fixes(to_fix, settings.root, options, extra_files=extra, progress=phase(progress, "fixing"))
        plan = _route_edits(plan, before, settings, resolved)
        if not write:
            remaining = _apply_route(_remaining_in_memory(before, plan, settings), settings, resolved)
            return FixOutcome(plan, None, None, declines.declined_are_manual(remaining, plan))
        plan = write_changes(plan, out, with_journal=record)
        rescan_root = out or settings.root
        rescan_paths = [rescan_root / Path(p).relative_to(settings.root) if Path(p).is_relative_to(settings.root) else p for p in resolved]
        rescanned = scan(rescan_paths, settings=replace(settings, root=rescan_root), progress=prefixed(progress, "re-"),
                         memo=memo)
        remaining = declines.declined_are_manual(rescanned, plan)
        record_path, record_error = None, None
        if record:
            try:
                covered = ledger.scanned_by(settings_selector(settings), rescan_root, rescan_paths)
                record_path = record_run(plan, rescan_root, remaining, covered)
            except OSError as exc:
                record_error = f"cannot write the fix record: {exc.strerror or exc}"
                if (rescan_root / journal.JOURNAL_PATH).is_file():
                    record_error += f"; this run's edits are kept in {journal.JOURNAL_PATH} and recorded by the next `migrate fix`"
        return FixOutcome(plan, rescan_root, record_path, remaining, record_error)


def _route_edits(plan, before: RunResult, settings: Settings, paths: list[Path]):
    """The route's own one-time edits (MindSpeed: the adaptor import and the pin), with `--route auto` too:
    what the adaptor patches is left unrewritten, so the adaptor must be there."""
    if settings.route == "none" or not before.frameworks:
        return plan
    from migrator.routes.fix import add_route_edits

    return add_route_edits(plan, before, settings.route, paths, settings.exclude, settings.target)


def _scanned_sources(settings: Settings, resolved: list[Path]) -> set[str]:
    from migrator.engine.discover import Candidate, discover

    return {c.rel for c in discover(settings.root, resolved, None) if isinstance(c, Candidate) and c.kind in ("python", "shell")}


def _remaining_in_memory(before: RunResult, plan, settings: Settings) -> RunResult:
    """Findings after the planned changes, without writing: rescan the new texts in memory."""
    from migrator.engine.discover import file_kind
    from migrator.engine.scan_file import ScanOptions, scan_text_content

    changed = {c.path: c for c in plan.changes if c.changed}
    options = ScanOptions(select=settings.select, ignore=settings.ignore, per_file_ignores=settings.per_file_ignores,
                          target=settings.target)
    kept = [f for f in before.findings if f.path not in changed]
    for rel, change in changed.items():
        kind = file_kind(Path(rel)) or "python"
        kept.extend(scan_text_content(change.after, rel, kind, options).findings)
    findings = tuple(sorted(kept, key=Finding.sort_key))
    s = before.summary
    summary = summarize(s.root, s.files_scanned, s.files_skipped, findings, s.suppressed, s.unattributed)
    return replace(before, findings=findings, summary=summary)


def summarize(root: str, files_scanned: int, files_skipped: int, findings: tuple[Finding, ...], suppressed: int, markers) -> Summary:
    return Summary(
        root=root,
        files_scanned=files_scanned,
        files_skipped=files_skipped,
        findings=len(findings),
        **finding_counts(findings),
        suppressed=suppressed,
        unattributed_markers=len(markers),
        unattributed=tuple(markers)[:MAX_LISTED_MARKERS],
    )


def _check_codes(codes: Sequence[str], rules: dict[str, Rule]) -> None:
    for code in codes:
        if not any(c.startswith(code) for c in rules):
            raise UsageError(f"unknown rule code or prefix {code!r} (see `migrate rules`)")


def ops(names: Sequence[str], soc: str = "A2", version: str | None = None) -> list[dict]:
    """`migrate ops NAME...`: status, dtypes, NPU equivalent and source per name; aliases (`F.`, `nn.`,
    `Tensor.`) expanded; a name neither in the table nor in torch gets `unknown_api: true` (exit 1)."""
    from migrator.coverage import explain as explain_ops

    return explain_ops(list(names), soc=soc, version=version, check_torch=True)


def trace_ops(target: str | Path, *, root: str | Path | None = None, soc: str | None = None,
              torch_npu_version: str | None = None, write: bool = True, progress: Progress | None = None, **options):
    """`migrate ops --trace TARGET`: the runtime op census of a program (migrator/census/).

    TARGET is a tree with the validate.py protocol or a script (`script_args`); options are the
    fields of `migrator.census.TraceOptions` (`steps`, `fake`, `entry`, `bf16_policy`, `timeout`...).
    The program runs only in a child process. Returns (census, path written or None, settings)."""
    from migrator.census import CensusError, TraceOptions, store, trace

    settings, _ = resolve_settings([target], root=root, soc=soc, torch_npu_version=torch_npu_version)
    try:
        opts = TraceOptions(target=str(target), root=str(settings.root), soc=settings.soc,
                            torch_npu_version=settings.torch_npu_version, **options)
    except TypeError as exc:
        raise UsageError(f"bad trace option: {exc}") from None
    try:
        if progress:
            progress("tracing in a child process", 0, 1)
        census = trace(opts)
        if progress:
            progress("tracing in a child process", 1, 1)
    except CensusError as exc:
        raise UsageError(str(exc)) from None
    path = store.write(settings.root, census) if write else None
    return census, path, settings


def ops_list(soc: str = "A2", version: str | None = None, status: str | None = None) -> list:
    from migrator.coverage import iter_entries

    return [e for e in iter_entries(soc=soc, version=version, status=status) if e.known]


def explain(code: str) -> Rule:
    rule = load_catalogue().get(code)
    if rule is None:
        raise UsageError(f"unknown rule {code!r}; `migrate rules` lists them")
    return rule


def rules() -> list[Rule]:
    return list(load_catalogue().rules.values())


# ---- baseline and reviewer report (migrator/baseline.py, migrator/report_data.py)


def apply_baseline(result: RunResult, baseline: str | Path) -> RunResult:
    """Only the findings the baseline file does not list; `summary.baselined` counts the others."""
    from migrator import baseline as bl
    from migrator.scanned_lines import SourceLines

    try:
        known = bl.load(baseline)
    except bl.BaselineError as exc:
        raise UsageError(str(exc)) from None
    return bl.filter_result(result, known, SourceLines(result.summary.root))


def baseline_text(result: RunResult) -> str:
    """The baseline file (JSON) recording every finding of `result`."""
    from migrator import baseline as bl
    from migrator.scanned_lines import SourceLines

    return bl.dumps(bl.make(result, SourceLines(result.summary.root)))


def report(
    paths: Sequence[str | Path],
    settings: Settings | None = None,
    *,
    fix_record: str | Path | None = None,
    validation: str | Path | None = None,
    diffs: dict[str, str] | None = None,
    diffs_applied: bool = False,
    proposed_diffs: bool = False,
    progress: Progress | None = None,
    plan: str | Path | None = None,
    **overrides,
):
    """Everything `migrate report` shows, as a `migrator.report_data.ReportData` (render it with
    `migrator.reporters.report.render(data, "html" | "md")`). `diffs` maps paths to unified diffs;
    `proposed_diffs=True` asks `fix(write=False)` for them."""
    from migrator.report_data import ReportDataError, gather

    if settings is None:
        settings, resolved = resolve_settings(paths, **overrides)
    else:
        resolved = [Path(p).absolute() for p in paths]
    result = scan(resolved, settings=settings, progress=progress)
    notes: list[str] = []
    if proposed_diffs and diffs is None:
        try:
            outcome = fix(resolved, settings=settings, target=settings.target, write=False,
                          progress=prefixed(progress, "diffs: "))
            diffs = {c.path: c.diff() for c in outcome.plan.changes if c.changed}
        except Exception as exc:  # the report still renders, with the reason shown
            notes.append(f"proposed diffs unavailable: {exc.__class__.__name__}: {exc}")
    try:
        data = gather(
            result, target=settings.target, soc=settings.soc, fix_record=fix_record,
            validation=validation, diffs=diffs, diffs_applied=diffs_applied, plan=plan,
        )
    except ReportDataError as exc:
        raise UsageError(str(exc)) from None
    return replace(data, notes=(*data.notes, *notes)) if notes else data


# ---- staged BF16 diff validation (migrator/validation/)


def validate(original: str | Path, *, progress: Callable[[str], None] | None = None, **options):
    """`migrate validate ORIGINAL` (see `migrator.api_programs.validate`); without `migrated` the tree is
    first migrated with `fix(target="npu", out_dir=<temp>)`."""
    from migrator import api_programs

    return api_programs.validate(original, migrate=_migrate_for_validation, progress=progress, **options)


def plan(model: str | Path, clusters: Sequence[str], **options):
    """`migrate plan` (see `migrator.api_programs.plan`); `check_s0` runs `validate` S0 on the best layouts."""
    from migrator import api_programs

    return api_programs.plan(model, clusters, validate=validate, **options)


def _migrate_for_validation(original: str, out_dir: str) -> list[str]:
    """The migrate step `migrate validate` runs when no migrated tree is given; error lines, none when done."""
    outcome = fix([original], root=original, target="npu", out_dir=out_dir)
    return [f"{p}: {e}" for p, e in outcome.errors]


def cache_clean() -> tuple[Path, int, int]:
    """`migrate cache clean`: (cache folder, files removed, bytes removed)."""
    from migrator.engine import cache

    folder = cache.cache_dir()
    files, size = cache.clean(folder)
    return folder, files, size


__all__ = ["scan", "fix", "explain", "rules", "resolve_settings", "UsageError", "ConfigError", "FixOutcome"]
__all__ += ["apply_baseline", "baseline_text", "report", "validate", "plan", "trace_ops", "cache_clean"]
