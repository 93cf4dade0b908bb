"""Findings as CSV, one row each under a header (the table Huawei's analysis tools give as CSV/xlsx).

Every finding, info included (a spreadsheet is filtered by its reader). A text cell starting with
`=`, `+`, `-`, `@`, tab or CR gets a leading `'` so a spreadsheet shows it instead of running it as
a formula (a scanned repository chooses its file names). The other CSV reporters (`ops_csv`,
`validation_csv`) write through `table` and `spreadsheet_cell` too.
"""

from __future__ import annotations

import csv
import io
import math
from collections.abc import Iterable, Sequence

from migrator.ground.model import RunResult

COLUMNS = ("path", "line", "column", "end_line", "end_column", "cell", "code", "name", "family", "severity",
           "message", "fix_kind", "fix_title", "declined")
_FORMULA = ("=", "+", "-", "@", "\t", "\r")


def spreadsheet_cell(value: object) -> str:
    """The cell's text: empty for None, finite numbers as Python writes them (a negative one stays a
    number), other text (`-inf` too) prefixed with `'` where a spreadsheet would run it as a formula."""
    if value is None:
        return ""
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    if isinstance(value, float) and math.isfinite(value):
        return repr(value)
    text = str(value)
    return "'" + text if text.startswith(_FORMULA) else text


def table(columns: Sequence[str], rows: Iterable[Iterable[object]]) -> str:
    """A header and the rows, every cell through `spreadsheet_cell` (csv quoting, `\\n` line ends)."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(columns)
    for row in rows:
        writer.writerow(spreadsheet_cell(v) for v in row)
    return out.getvalue()


def render(result: RunResult) -> str:
    def rows() -> Iterable[tuple[object, ...]]:
        for f in sorted(result.findings, key=lambda f: f.sort_key()):
            fix_kind, fix_title = (f.fix.kind, f.fix.title) if f.fix else ("manual", "")
            yield (f.path, f.line, f.column, f.end_line, f.end_column, f.cell, f.code, f.name, f.family, f.severity,
                   f.message, fix_kind, fix_title, f.declined)

    return table(COLUMNS, rows())
