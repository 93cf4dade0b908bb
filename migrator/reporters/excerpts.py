"""Source excerpts around findings and unified-diff rows for the report (highlighted, escaped)."""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Mapping
from typing import Any

from migrator.model import Finding
from migrator.reporters.highlight import highlight, highlight_spans, visible

CONTEXT_LINES = 2


def _file_excerpt(
    lines: tuple[str, ...] | None, cells: Mapping[int, tuple[str, ...]] | None, findings: list[Finding], lang: str
) -> list[dict] | None:
    """The excerpt of a file; in a notebook, findings with a cell are shown in that cell's source
    (their lines count within it), one group of blocks per cell, Python-highlighted."""
    if cells is None or all(f.cell is None for f in findings):
        return _excerpt(lines, findings, lang)
    plain = [f for f in findings if f.cell is None]
    blocks = (_excerpt(lines, plain, lang) or []) if plain else []
    for cell in sorted({f.cell for f in findings if f.cell is not None}):
        blocks += _excerpt(cells.get(cell, ()), [f for f in findings if f.cell == cell], "python", cell) or []
    return blocks


def _row_key(cell: int | None, line: int) -> str | int:
    return line if cell is None else f"c{cell}-{line}"


def _excerpt(lines: tuple[str, ...] | None, findings: list[Finding], lang: str, cell: int | None = None) -> list[dict] | None:
    """Blocks of source around the findings: [{start, cell, rows: [{no, key, html, text, hits}]}]
    (`cell`: the notebook cell the lines belong to, else None; `key` names the row's anchor)."""
    if lines is None:
        return None
    wanted: set[int] = set()
    for f in findings:
        last = min(max(f.end_line, f.line), f.line + 3)
        for n in range(f.line - CONTEXT_LINES, last + CONTEXT_LINES + 1):
            if 1 <= n <= len(lines):
                wanted.add(n)
    by_line: dict[int, list[Finding]] = defaultdict(list)
    spans: dict[int, list[tuple[int, int]]] = defaultdict(list)
    for f in findings:
        by_line[f.line].append(f)
        if 1 <= f.line <= len(lines):
            end = f.end_column - 1 if f.end_line == f.line else len(lines[f.line - 1])
            spans[f.line].append((f.column - 1, end))
    blocks: list[dict] = []
    previous = None
    for n in sorted(wanted):
        if previous is None or n != previous + 1:
            blocks.append({"start": n, "cell": cell, "rows": []})
        text = lines[n - 1]
        blocks[-1]["rows"].append(
            {
                "no": n,
                "key": _row_key(cell, n),
                "text": visible(text),
                "html": highlight_spans(text, spans[n], lang) if n in spans else highlight(text, lang),
                "hits": by_line.get(n, []),
            }
        )
        previous = n
    return blocks


def _excerpt_text(blocks: list[dict] | None) -> str | None:
    """Plain-text excerpt for Markdown: `> 12 | code` marks a flagged line."""
    if blocks is None:
        return None
    width = max((len(str(row["no"])) for b in blocks for row in b["rows"]), default=1)
    out = []
    for i, block in enumerate(blocks):
        if block.get("cell") is not None and (i == 0 or blocks[i - 1].get("cell") != block["cell"]):
            out.append(f"[cell {block['cell']}]")
        elif i:
            out.append(" " * (width + 2) + "...")
        for row in block["rows"]:
            out.append(f"{'>' if row['hits'] else ' '} {row['no']:>{width}} | {row['text']}".rstrip())
    return "\n".join(out)


_HUNK = re.compile(r"^@@ -(\d+)(?:,\d+)? \+(\d+)(?:,\d+)? @@")


def _diff_rows(diff: str, lang: str) -> list[dict]:
    rows: list[dict[str, Any]] = []
    old = new = 0
    for raw in diff.splitlines():
        if raw.startswith(("--- ", "+++ ", "diff ", "index ")):
            rows.append({"kind": "head", "old": "", "new": "", "sign": "", "html": highlight(raw, "text"), "text": visible(raw)})
            continue
        m = _HUNK.match(raw)
        if m:
            old, new = int(m.group(1)), int(m.group(2))
            rows.append({"kind": "hunk", "old": "", "new": "", "sign": "", "html": highlight(raw, "text"), "text": visible(raw)})
            continue
        mark, body = raw[:1], raw[1:]
        if mark == "+":
            rows.append({"kind": "add", "old": "", "new": new, "sign": "+", "html": highlight(body, lang)})
            new += 1
        elif mark == "-":
            rows.append({"kind": "del", "old": old, "new": "", "sign": "-", "html": highlight(body, lang)})
            old += 1
        elif mark == "\\":
            rows.append({"kind": "meta", "old": "", "new": "", "sign": "", "html": highlight(raw, "text")})
        else:
            rows.append({"kind": "ctx", "old": old, "new": new, "sign": " ", "html": highlight(body, lang)})
            old += 1
            new += 1
    return rows
