"""Data that crosses layers: findings, summaries and run results.

Everything here is a frozen dataclass with a `to_dict()` producing the documented JSON
(`migrator/ground/schema/findings.schema.json`). Reporters render these; they never see syntax trees.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypedDict

from migrator.ground.jsonfile import JsonObject
from migrator.ground.serialise import from_data, register, shape, to_object

if TYPE_CHECKING:
    from cattrs import Converter

SEVERITIES = ("error", "warning", "info")
SEVERITY_RANK = {"info": 0, "warning": 1, "error": 2}
FAIL_LEVELS = ("error", "warning", "info", "never")
FIX_KINDS = ("exact", "numerics", "manual")
FAMILIES = (
    "device",
    "distributed",
    "amp",
    "apex",
    "attention",
    "kernels",
    "environment",
    "coverage",
    "fusion",
    "perf",
    "meta",
)


FAMILY_PREFIX = {
    "device": "DEV",
    "distributed": "DIST",
    "amp": "AMP",
    "apex": "APEX",
    "attention": "ATTN",
    "kernels": "KERN",
    "environment": "ENV",
    "coverage": "OPS",
    "fusion": "FUS",
    "perf": "PERF",
    "meta": "MIG",
}


# advice on running fast on Ascend (fused ops, performance lint): no CUDA dependency, so never counted as a
# site to migrate and never the scan's exit code; `--select FUS,PERF` reports them, `--ignore` hides them
ADVISORY_FAMILIES = ("fusion", "perf")


def is_advice(finding: Finding) -> bool:
    return finding.family in ADVISORY_FAMILIES


class FindingCounts(TypedDict):
    by_family: dict[str, int]
    by_severity: dict[str, int]
    by_fix_kind: dict[str, int]


def finding_counts(findings: Iterable[Finding]) -> FindingCounts:
    """by_family, by_severity and by_fix_kind for a summary. by_family leaves out findings a framework
    route covers (the route headline counts those); `manual` counts manual findings that are work:
    not info-level notes, not covered."""
    findings = list(findings)
    open_findings = [f for f in findings if not (f.route and f.route.absorbs)]
    return {
        "by_family": {fam: sum(1 for f in open_findings if f.family == fam) for fam in FAMILIES},
        "by_severity": {s: n for s in sorted(SEVERITIES) if (n := sum(1 for f in findings if f.severity == s))},
        "by_fix_kind": {
            "exact": sum(1 for f in findings if f.fix and f.fix.kind == "exact"),
            "numerics": sum(1 for f in findings if f.fix and f.fix.kind == "numerics"),
            "manual": sum(1 for f in open_findings if f.fix is None and f.severity != "info" and not is_advice(f)),
        },
    }


@dataclass(frozen=True)
class FixInfo:
    """What an automatic fix would do; absent (None) for manual findings."""

    kind: str  # "exact" | "numerics"
    title: str

    def to_dict(self) -> JsonObject:
        return to_object(self)


@dataclass(frozen=True)
class CoverageInfo:
    status: str
    soc: str
    dtypes: tuple[str, ...]
    note: str

    def to_dict(self) -> JsonObject:
        return to_object(self)


@dataclass(frozen=True)
class ImportInfo:
    """The finding is an import statement: which library, and whether it is optional (inside
    `try: ... except ImportError:` with a fallback that does not re-raise)."""

    library: str  # the top-level module, e.g. "transformer_engine"
    optional: bool = False

    def to_dict(self) -> JsonObject:
        return to_object(self)


@dataclass(frozen=True)
class EffortNote:
    """Minutes a finding's own site needs where its rule's flat figure does not fit (a CUDA file's kernels,
    by size and by what is left), and how they were reckoned."""

    minutes: float
    why: str

    def to_dict(self) -> JsonObject:
        return to_object(self)


@dataclass(frozen=True)
class RouteMark:
    """What a framework route (`--route`) does for a finding: covered, covered only with a flag, or left."""

    status: str  # "covered" | "gated" | "left"
    route: str  # e.g. "MindSpeed 2.1.0_core_r0.12.1"
    target: str  # the route's entry that matched (patch target, op module, config value)
    note: str
    source: str  # where the fact was read (file:line in MindSpeed, a DeepSpeed builder, ...)
    flag: str | None = None  # gated: what the user must set
    condition: str | None = None  # e.g. "transformers >= 4.51.0 (pinned 4.51.3)"

    @property
    def absorbs(self) -> bool:
        """Covered (possibly with a flag): no effort, does not fail the exit code."""
        return self.status in ("covered", "gated")

    def to_dict(self) -> JsonObject:
        return to_object(self)


@dataclass(frozen=True)
class Finding:
    code: str
    name: str
    family: str
    severity: str
    path: str  # POSIX, relative to the scan root
    line: int  # 1-based
    column: int  # 1-based, in characters
    end_line: int
    end_column: int
    symbol: str
    message: str
    fix: FixInfo | None = None
    coverage: CoverageInfo | None = None
    cell: int | None = None  # notebooks: 1-based index of the cell among all cells; `line` is within it
    route: RouteMark | None = None  # set by --route when a framework route handles this finding
    declined: str | None = None  # the rule's fix exists but its precheck declined this site: why
    imported: ImportInfo | None = None  # set when the finding is an import statement
    role: str | None = None  # the file's path role (migrator/ground/path_roles.py), set once per scan
    effort: EffortNote | None = None  # this site's own minutes (else the rule's; reporters/effort.py)

    def sort_key(self) -> tuple:
        return (self.path, self.cell or 0, self.line, self.column, self.code)

    def location(self) -> str:
        """`path:line:col`, or `path:cell N:line:col` for a notebook cell."""
        cell = f"cell {self.cell}:" if self.cell is not None else ""
        return f"{self.path}:{cell}{self.line}:{self.column}"

    def to_dict(self) -> JsonObject:
        return to_object(self)

    @classmethod
    def from_dict(cls, data: JsonObject, source: str = "finding") -> Finding:
        """Strict: an unknown key, a missing field or a wrong type raises SerialiseError naming `source`."""
        return from_data(data, cls, source)


@dataclass(frozen=True)
class Marker:
    """A CUDA-ish token on a code line that no rule claimed (never silently dropped)."""

    path: str
    line: int
    marker: str
    cell: int | None = None  # notebooks, as in Finding

    def to_dict(self) -> JsonObject:
        return to_object(self)


@dataclass(frozen=True)
class SkippedFile:
    path: str
    reason: str

    def to_dict(self) -> JsonObject:
        return to_object(self)


@dataclass(frozen=True)
class OpUse:
    """One call site of a torch op, for the coverage summary."""

    name: str
    path: str
    line: int
    column: int
    status: str = "unverified"
    dtypes: tuple[str, ...] = ()
    npu_name: str | None = None
    cell: int | None = None  # notebooks, as in Finding


@dataclass(frozen=True)
class FileResult:
    """What the engine learned about one file (cached by content hash)."""

    path: str
    findings: tuple[Finding, ...] = ()
    markers: tuple[Marker, ...] = ()
    ops: tuple[OpUse, ...] = ()
    skipped: str | None = None  # reason, when the file was deliberately not scanned
    suppressed: int = 0


@dataclass(frozen=True)
class OpSummary:
    """One distinct torch op the scan found: its status on the SoC and the table's facts behind it."""

    name: str
    status: str  # one of migrator.catalogue.coverage.STATUSES
    dtypes: tuple[str, ...]
    npu_name: str | None
    count: int  # call sites in all
    sites: tuple[str, ...]  # `path:line` or `path:cell N:line`, the first few of `count`
    runs_as: str = ""  # the NPU name, or aten::op and its kernel kind; empty when the table says nothing
    why: str = ""  # the limit or fact behind the status


@dataclass(frozen=True)
class CoverageSummary:
    """The ops a scan found, judged for one SoC and torch-npu release."""

    soc: str
    torch_npu_version: str
    distinct_ops: int
    by_status: dict[str, int]  # every status, zero included, in migrator.catalogue.coverage.STATUSES order
    ops: tuple[OpSummary, ...]


@dataclass(frozen=True)
class Summary:
    root: str
    files_scanned: int
    files_skipped: int
    findings: int
    by_family: dict[str, int]
    by_severity: dict[str, int]
    by_fix_kind: dict[str, int]
    suppressed: int
    unattributed_markers: int
    unattributed: tuple[Marker, ...]
    coverage: CoverageSummary | None = None
    baselined: int | None = None  # findings hidden by --baseline (None: no baseline applied)

    def to_dict(self) -> JsonObject:
        return to_object(self)


@dataclass(frozen=True)
class ToolInfo:
    name: str
    version: str
    catalogue: str  # short hash of the rule catalogue
    coverage_table: str | None = None

    def to_dict(self) -> JsonObject:
        return to_object(self)


@dataclass(frozen=True)
class RunResult:
    tool: ToolInfo
    summary: Summary
    findings: tuple[Finding, ...]
    skipped: tuple[SkippedFile, ...] = field(default=())
    frameworks: tuple[Any, ...] = ()  # migrator.routes.FrameworkRoute per detected framework (--route)

    def to_dict(self) -> JsonObject:
        return to_object(self)

    def worst(self, n: int = 3) -> tuple[Finding, ...]:
        """The n most serious findings: production code first (then scripts, examples, tests, docs), within a
        role errors first, manual before auto-fixable."""
        from migrator.ground.path_roles import role_rank

        def rank(f: Finding) -> tuple:
            return (role_rank(f.role), -SEVERITY_RANK[f.severity], f.fix is not None, f.sort_key())

        picked: list[Finding] = []
        seen: set[tuple[str, str]] = set()
        open_findings = (f for f in self.findings
                         if not (f.route and f.route.absorbs) and not (f.imported and f.imported.optional))
        for f in sorted(open_findings, key=rank):  # covered findings and optional imports are not problems
            if (f.code, f.symbol) not in seen:  # the same problem twice is not the second-worst one
                seen.add((f.code, f.symbol))
                picked.append(f)
            if len(picked) == n:
                break
        return tuple(picked)


@register
def _hooks(conv: Converter) -> None:
    """How each class is written: the keys of `migrator/ground/schema/findings.schema.json`, in its order;
    optional fields left out when absent."""
    for cls in (FixInfo, CoverageInfo, RouteMark, Marker, SkippedFile, EffortNote):
        shape(conv, cls)
    shape(conv, ImportInfo, always=("optional",))
    shape(conv, Finding, rename={"imported": "import"}, always=("fix",))
    shape(conv, OpSummary, always=("npu_name", "runs_as", "why"))
    shape(conv, CoverageSummary)
    shape(conv, Summary)
    shape(conv, ToolInfo, always=("coverage_table",))
    shape(conv, RunResult, always=("skipped",), write={"frameworks": lambda fws: [fw.to_dict() for fw in fws]})
