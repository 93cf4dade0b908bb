"""Op coverage as CSV: one row per op, the same columns whichever command asked.

* `migrate ops NAME... --format csv` (and `--list`): one row per name asked, in order;
* `migrate scan --format csv-ops`: one row per distinct op the scanned code calls, with its call count
  and `path:line` sites (the first `pipeline.scan.MAX_OP_SITES` of them);
* `migrate ops --trace ... --format csv`: one row per traced (op, input dtypes), the status after the
  dtype check, with the user's lines that ran it.

Cells go through `csv_table.spreadsheet_cell` (formula-looking text defused). A column the source does
not know stays empty.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import fields
from typing import TYPE_CHECKING, Any

from migrator.catalogue.coverage import CoverageEntry, CoverageError, lookup, runs_as
from migrator.reporters.csv_table import table

if TYPE_CHECKING:
    from migrator.census.model import Census, TracedOp
    from migrator.ground.model import RunResult

OPS_COLUMNS = ("op", "asked_as", "status", "soc", "coverage_table", "dtypes", "dtypes_used", "npu_name", "runs_as",
               "notes", "source", "uses", "sites")
_ENTRY_FIELDS = frozenset(f.name for f in fields(CoverageEntry))
SITE_SEPARATOR = "; "


def _table_name(version: str) -> str:
    return f"torch-npu {version}" if version else ""


def _joined(values: Iterable[str]) -> str:
    return SITE_SEPARATOR.join(values)


def render_lookups(records: Iterable[Mapping[str, object]]) -> str:
    """`migrate ops` answers (`CoverageEntry.to_dict()` records, `explain`'s extra keys allowed)."""

    def row(record: Mapping[str, object]) -> tuple[object, ...]:
        known: dict[str, Any] = {k: tuple(v) if isinstance(v, list) else v for k, v in record.items()
                                 if k in _ENTRY_FIELDS}  # JSON lists back to the entry's tuples
        entry = CoverageEntry(**known)
        extra: dict[str, Any] = dict(record)
        notes = [entry.note] if entry.note else []
        notes += [f"partial: {why}" for why in extra.get("partial_because") or ()]
        rules = extra.get("rules") or ()
        if rules:
            notes.append("not a torch API; covered by rule " + ", ".join(r["code"] for r in rules))
        if record.get("unknown_api"):
            notes.append("unknown API: neither in torch nor in the op-coverage table")
        query = record.get("query")
        return (entry.name, query if query != entry.name else "", entry.status, entry.soc, _table_name(entry.version),
                _joined(entry.dtypes), "", entry.npu_name, runs_as(entry), _joined(notes), entry.source, "", "")

    return table(OPS_COLUMNS, (row(r) for r in records))


def render_scan(result: RunResult) -> str:
    """The ops the scanned code calls (`RunResult.summary.coverage`); a header only when none was judged."""
    coverage = result.summary.coverage
    if coverage is None:
        return table(OPS_COLUMNS, ())

    def row(name: str, status: str, dtypes: tuple[str, ...], npu_name: str | None, runs: str, why: str, count: int,
            sites: tuple[str, ...]) -> tuple[object, ...]:
        try:  # the table's source for the op (the scan result keeps its verdict, not where it came from)
            source = lookup(name, soc=coverage.soc, version=coverage.torch_npu_version or None).source
        except CoverageError:
            source = ""
        return (name, "", status, coverage.soc, _table_name(coverage.torch_npu_version), _joined(dtypes), "",
                npu_name, runs, why, source, count, _joined(sites))

    return table(OPS_COLUMNS, (row(op.name, op.status, op.dtypes, op.npu_name, op.runs_as, op.why, op.count, op.sites)
                               for op in coverage.ops))


def render_census(census: Census) -> str:
    """`migrate ops --trace`: each traced op, its status after the dtype check (`TracedOp.verdict`)."""

    def row(op: TracedOp) -> tuple[object, ...]:
        notes = [text for text in (op.message, op.note) if text]
        sites = [f"{s.user.path}:{s.user.line}" for s in op.sites if s.user is not None]
        return (op.op, "", op.verdict, census.soc, _table_name(census.torch_npu_version),
                _joined(op.documented_dtypes), _joined(op.dtypes), "", op.kernel, _joined(notes), "", op.count,
                _joined(dict.fromkeys(sites)))

    return table(OPS_COLUMNS, (row(op) for op in census.ops))
