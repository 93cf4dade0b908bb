"""The scan: the engine's per-file results finished into a `RunResult` — sorted findings, the summary
and its coverage table, declines recorded by an earlier fix marked manual, then framework routes.

`fix` scans through here too (before planning, the planned texts for --diff/--check via `overlay`,
and after writing), so its results are a fresh scan's by construction.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from migrator import __version__
from migrator.catalogue.loader import Rule, load_catalogue
from migrator.ground import declines
from migrator.ground.config import Settings
from migrator.ground.model import (
    CoverageSummary,
    FileResult,
    Finding,
    Marker,
    OpSummary,
    OpUse,
    RunResult,
    Summary,
    ToolInfo,
    finding_counts,
    is_advice,
)
from migrator.ground.own_code import unchanged_runtime_modules
from migrator.ground.path_roles import PathRoles, path_roles, role_rank
from migrator.ground.progress import Progress, phase
from migrator.ground.usage_error import UsageError
from migrator.pipeline.options import scan_options, selector

if TYPE_CHECKING:
    from migrator.engine.runner import EngineOutput

MAX_LISTED_MARKERS = 200
MAX_OP_SITES = 20


@dataclass(frozen=True)
class TreeScan:
    """A finished scan, with the 16-bit dtypes its files show (what its op verdicts were judged for)."""

    result: RunResult
    training_dtypes: tuple[str, ...]


def scan_tree(settings: Settings, paths: list[Path], progress: Progress | None = None, memo: dict | None = None,
              overlay: Mapping[str, bytes] | None = None) -> TreeScan:
    """Scan `paths` (absolute) under `settings`; `memo`: shared by the scans of one command so that
    unchanged files are scanned once; `overlay`: root-relative path -> bytes scanned instead of the file."""
    from migrator.engine.runner import run

    catalogue = load_catalogue()
    check_codes(settings.select + settings.ignore, catalogue.rules)
    output = run(settings, paths, scan_options(settings), phase(progress, "scanning"), memo=memo, overlay=overlay)
    files = without_own_modules(output.files, settings.root)
    roles = path_roles(settings.root, settings.path_roles)
    # advice is about the training run: a unit test's `.item()` or DataLoader is not in it
    placed = (replace(f, role=roles.role(f.path)) for r in files for f in r.findings)
    findings = tuple(sorted((f for f in placed if not (f.role == "test" and is_advice(f))), key=Finding.sort_key))
    summary = summarize(
        settings.root.as_posix(),
        files_scanned=sum(1 for r in files if not r.skipped),
        files_skipped=len(output.skipped),
        findings=findings,
        suppressed=sum(r.suppressed for r in files),
        markers=tuple(m for r in files for m in r.markers),
    )
    ops = tuple(op for r in files for op in r.ops)
    rule_selector = selector(settings)
    coverage_on = any(rule_selector.enabled(r.code, r.default_enabled) for r in catalogue.by_family("coverage"))
    summary = replace(summary, coverage=coverage_summary(ops, settings) if coverage_on else None)
    tool = ToolInfo("ascend-migrate", __version__, catalogue.digest, coverage_table_name(settings))
    result = RunResult(tool=tool, summary=summary, findings=findings, skipped=output.skipped)
    result = apply_route(declines.mark_manual(result, declines.recorded(settings.root)), settings, paths, overlay,
                         output)
    return TreeScan(with_evidence_roles(result, roles), output.training_dtypes)


def with_evidence_roles(result: RunResult, roles: PathRoles) -> RunResult:
    """Each framework route marked with the roles of the files it was found in: one found only in an
    example's requirements is not the project's framework, and its headline leaves the first screen."""
    if not result.frameworks:
        return result
    marked = tuple(replace(fw, roles=tuple(sorted({roles.role(p) for p in fw.framework.sources}, key=role_rank)))
                   for fw in result.frameworks)
    return replace(result, frameworks=marked)


def without_own_modules(files: Sequence[FileResult], root: Path) -> list[FileResult]:
    """A runtime module the fix wrote and nobody edited since is the tool's code: scanned, nothing in it counts."""
    ours = unchanged_runtime_modules(root)
    return [FileResult(r.path) if r.path in ours and not r.skipped else r for r in files]


def apply_route(result: RunResult, settings: Settings, paths: list[Path],
                overlay: Mapping[str, bytes] | None = None, scanned: EngineOutput | None = None) -> RunResult:
    """Framework routes (migrator/routes): `--route none` leaves the result as the rules made it; a framework
    is detected from the scanned paths only (`scanned`: the scan's files and the import lines it found in them,
    so detection neither discovers nor reads them again)."""
    if settings.route == "none":
        return result
    from migrator.routes import CHOICES, apply_routes
    from migrator.routes.table import RouteTableError

    if settings.route not in CHOICES:
        raise UsageError(f"unknown route {settings.route!r}; choose one of {', '.join(CHOICES)}")
    try:
        return apply_routes(result, settings.root, settings.route, paths, settings.exclude, overlay,
                            scanned.framework_imports if scanned else None, scanned.discovered if scanned else None)
    except RouteTableError as exc:
        raise UsageError(str(exc)) from None


def summarize(root: str, files_scanned: int, files_skipped: int, findings: tuple[Finding, ...], suppressed: int,
              markers: Sequence[Marker]) -> Summary:
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


def check_codes(codes: Sequence[str], rules: dict[str, Rule]) -> None:
    for code in codes:
        if not any(c.startswith(code) for c in rules):
            raise UsageError(f"unknown rule code or prefix {code!r} (see `migrate rules`)")


def coverage_table_name(settings: Settings) -> str | None:
    from migrator.catalogue.coverage import CoverageError, default_version

    try:
        return f"torch-npu {settings.torch_npu_version or default_version()}"
    except CoverageError:
        return None


def _site(op: OpUse) -> str:
    """`path:line`, or `path:cell N:line` for a notebook (whose lines count within the cell)."""
    return f"{op.path}:cell {op.cell}:{op.line}" if op.cell is not None else f"{op.path}:{op.line}"


def coverage_summary(ops: Iterable[OpUse], settings: Settings) -> CoverageSummary:
    """Distinct torch ops used, with status and call sites, for the summary and the report."""
    by_name: dict[str, list[OpUse]] = {}
    for op in ops:
        by_name.setdefault(op.name, []).append(op)
    from migrator.catalogue.coverage import STATUSES, CoverageError, lookup, runs_as, status_reason

    rows = []
    for name in sorted(by_name):
        sites = by_name[name]
        first = sites[0]
        try:  # the table's facts behind the status: what the op runs as, which limit makes it partial
            entry = lookup(name, soc=settings.soc, version=settings.torch_npu_version)
            runs, why = runs_as(entry), status_reason(entry) if entry.status == first.status else ""
        except CoverageError:
            runs, why = "", ""
        rows.append(OpSummary(name=name, status=first.status, dtypes=first.dtypes, npu_name=first.npu_name,
                              count=len(sites), sites=tuple(_site(s) for s in sites[:MAX_OP_SITES]),
                              runs_as=runs, why=why))
    by_status = Counter(r.status for r in rows)
    return CoverageSummary(
        soc=settings.soc,
        torch_npu_version=(coverage_table_name(settings) or "").replace("torch-npu ", ""),
        distinct_ops=len(rows),
        by_status={s: by_status.get(s, 0) for s in STATUSES},
        ops=tuple(rows),
    )
