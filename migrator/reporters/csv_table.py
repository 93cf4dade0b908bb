"""Findings as CSV, one row each under a header (the table Huawei's analysis tools give as CSV/xlsx).

Every finding, info included (a spreadsheet is filtered by its reader). A text cell starting with
`=`, `+`, `-`, `@`, tab or CR gets a leading `'` so a spreadsheet shows it instead of running it as
a formula (a scanned repository chooses its file names).
"""

from __future__ import annotations

import csv
import io

from migrator.ground.model import RunResult

COLUMNS = ("path", "line", "column", "end_line", "end_column", "cell", "code", "name", "family", "severity",
           "message", "fix_kind", "fix_title", "declined")
_FORMULA = ("=", "+", "-", "@", "\t", "\r")


def _cell(value: object) -> str:
    if value is None:
        return ""
    if isinstance(value, int):
        return str(value)
    text = str(value)
    return "'" + text if text.startswith(_FORMULA) else text


def render(result: RunResult) -> str:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(COLUMNS)
    for f in sorted(result.findings, key=lambda f: f.sort_key()):
        fix_kind, fix_title = (f.fix.kind, f.fix.title) if f.fix else ("manual", "")
        writer.writerow(_cell(v) for v in (f.path, f.line, f.column, f.end_line, f.end_column, f.cell, f.code,
                                           f.name, f.family, f.severity, f.message, fix_kind, fix_title, f.declined))
    return out.getvalue()
