"""GitHub Actions workflow commands: one annotation per finding on the PR's "Files changed" tab.

    ::warning file=train.py,line=3,endLine=3,col=33,endColumn=38,title=DIST001 nccl-backend::message

Levels: error -> `error`, warning -> `warning`, info -> `notice`. Escaping follows the runner's
rules: in the message `%`, CR and LF are percent-encoded; in properties also `:` and `,`. Other
control bytes, bidi overrides and undecodable bytes of a name are shown as escapes first
(`migrator.ground.safe_text.visible`), so nothing reaches the log viewer as a terminal sequence.
`endColumn` is inclusive here (the findings' end column is exclusive). A notebook finding (`cell`
set; its line counts within the cell) points at the raw JSON line holding its source line, and its
message starts with "cell N, line L: ".
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from migrator.ground.model import RunResult
from migrator.ground.safe_text import visible

if TYPE_CHECKING:
    from migrator.engine.scanned_lines import CellLines
    from migrator.ground.model import Finding

LinesOf = Callable[[str], "list[str] | None"]

LEVEL = {"error": "error", "warning": "warning", "info": "notice"}


def escape_data(text: str) -> str:
    text = "\r".join(visible(part) for part in text.split("\r"))  # CR kept for %0D below
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def escape_property(text: str) -> str:
    return escape_data(text).replace(":", "%3A").replace(",", "%2C")


def _position(f: Finding, source: CellLines | None) -> tuple[int, int, int, int] | None:
    """(line, col, end line, end col exclusive) in the file; a notebook finding counts within its cell,
    so it is mapped to the raw JSON line holding that source line (None when unknown)."""
    if f.cell is None:
        return f.line, f.column, max(f.end_line, f.line), f.end_column
    start = source.raw_position(f.path, f.cell, f.line, f.column) if source is not None else None
    if start is None or source is None:
        return None
    end = source.raw_position(f.path, f.cell, max(f.end_line, f.line), f.end_column)
    if end is None or end < start:
        end = (start[0], start[1] + 1)
    return start[0], start[1], end[0], end[1]


def render(result: RunResult, lines_of: LinesOf | None = None, include_info: bool = False) -> str:
    """`lines_of(path) -> list[str] | None` reads files back, to place notebook findings (without
    it they are file-level annotations, the cell named in the message). Warnings and errors only
    unless `include_info` (migrator/reporters/annotations.py)."""
    from migrator.reporters.annotations import emitted, level, message_suffix

    source = None
    if lines_of is not None:
        from migrator.engine.scanned_lines import CellLines

        source = CellLines(lines_of)
    out = []
    for f in emitted(result.findings, include_info):
        props = [("file", f.path)]
        where = _position(f, source)
        if where is not None:
            line, col, end_line, end_column = where
            props += [("line", str(line)), ("endLine", str(end_line)), ("col", str(col))]
            end_col = end_column - 1  # inclusive
            if (end_line > line and end_col >= 1) or end_col >= col:
                props.append(("endColumn", str(end_col)))
        props.append(("title", f"{f.code} {f.name}"))
        message = f.message + message_suffix(f)
        if f.cell is not None:
            message = f"cell {f.cell}, line {f.line}: {message}"
        if f.fix:
            message += f"\nFix ({f.fix.kind}{', validate this' if f.fix.kind == 'numerics' else ''}): {f.fix.title}"
        else:
            message += f"\nManual: see `migrate rule {f.code}`"
        head = ",".join(f"{k}={escape_property(v)}" for k, v in props)
        out.append(f"::{LEVEL[level(f)]} {head}::{escape_data(message)}")
    return "".join(line + "\n" for line in out)
