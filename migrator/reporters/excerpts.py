"""Source excerpts around findings and unified-diff rows for the report (highlighted, escaped)."""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Mapping
from typing import Any

from migrator.ground.model import Finding
from migrator.reporters.highlight import highlight, highlight_spans, visible

CONTEXT_LINES = 2
# Very large files stay readable and the page stays small: a shown line is a window of at most
# MAX_LINE_WIDTH characters around its first finding, and a file shows the source of at most
# MAX_FLAGGED_LINES flagged lines (later findings are listed without source), each time with a note.
MAX_LINE_WIDTH = 400
MAX_FLAGGED_LINES = 100
MAX_NOTES_PER_LINE = 20  # findings explained under one shown line; the findings table lists them all


def _file_excerpt(
    lines: tuple[str, ...] | None, cells: Mapping[int, tuple[str, ...]] | None, findings: list[Finding], lang: str,
    notes: list[str],
) -> list[dict] | None:
    """The excerpt of a file; in a notebook, findings with a cell are shown in that cell's source
    (their lines count within it), one group of blocks per cell, Python-highlighted. What was capped
    is said in `notes`."""
    if cells is None or all(f.cell is None for f in findings):
        return _excerpt(lines, findings, lang, notes=notes)
    plain = [f for f in findings if f.cell is None]
    blocks = (_excerpt(lines, plain, lang, notes=notes) or []) if plain else []
    for cell in sorted({f.cell for f in findings if f.cell is not None}):
        blocks += _excerpt(cells.get(cell, ()), [f for f in findings if f.cell == cell], "python", cell, notes) or []
    return blocks


def _row_key(cell: int | None, line: int) -> str | int:
    return line if cell is None else f"c{cell}-{line}"


def clip_line(text: str, spans: list[tuple[int, int]]) -> tuple[str, list[tuple[int, int]], tuple[int, int] | None]:
    """A window of at most MAX_LINE_WIDTH characters of `text` around its first span ("…" marks what
    is cut), the spans moved into it, and the 1-based columns shown (None when nothing was cut)."""
    if len(text) <= MAX_LINE_WIDTH:
        return text, spans, None
    first = min((start for start, _ in spans), default=0)
    start = max(0, min(first - MAX_LINE_WIDTH // 4, len(text) - MAX_LINE_WIDTH))
    end = start + MAX_LINE_WIDTH
    head = "…" if start else ""
    shift = start - len(head)
    moved = [(max(a, start) - shift, min(b, end) - shift) for a, b in spans if b > start and a < end]
    return head + text[start:end] + ("…" if end < len(text) else ""), moved, (start + 1, end)


def _clip_note(where: str, length: int, shown: tuple[int, int]) -> str:
    return f"{where} has {length:,} characters: columns {shown[0]:,}–{shown[1]:,} shown (capped)"


def _excerpt(
    lines: tuple[str, ...] | None, findings: list[Finding], lang: str, cell: int | None = None,
    notes: list[str] | None = None,
) -> list[dict] | None:
    """Blocks of source around the findings: [{start, cell, rows: [{no, key, html, text, hits}]}]
    (`cell`: the notebook cell the lines belong to, else None; `key` names the row's anchor)."""
    if lines is None:
        return None
    notes = [] if notes is None else notes
    where = f"cell {cell}, line" if cell is not None else "line"
    flagged = sorted({f.line for f in findings if 1 <= f.line <= len(lines)})
    if len(flagged) > MAX_FLAGGED_LINES:
        notes.append(
            f"{len(flagged) - MAX_FLAGGED_LINES:,} more flagged lines{f' in cell {cell}' if cell is not None else ''} "
            f"are listed below without their source (capped at {MAX_FLAGGED_LINES})"
        )
        keep = set(flagged[:MAX_FLAGGED_LINES])
        findings = [f for f in findings if f.line in keep]
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
        text, marks, shown = clip_line(lines[n - 1], spans.get(n, []))
        if shown is not None:
            notes.append(_clip_note(f"{where} {n}", len(lines[n - 1]), shown))
        blocks[-1]["rows"].append(
            {
                "no": n,
                "key": _row_key(cell, n),
                "text": visible(text),
                "html": highlight_spans(text, marks, lang) if n in spans else highlight(text, lang),
                "hits": by_line.get(n, [])[:MAX_NOTES_PER_LINE],
                "more_hits": max(0, len(by_line.get(n, [])) - MAX_NOTES_PER_LINE),
            }
        )
        previous = n
    return blocks


def _summarise_notes(notes: list[str], limit: int = 5) -> list[str]:
    """At most `limit` capping notes per file (a minified file can have one per line)."""
    if len(notes) <= limit:
        return notes
    return notes[:limit] + [f"{len(notes) - limit:,} more lines capped the same way"]


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


def _clip_diff(diff: str, notes: list[str]) -> list[str]:
    """The diff's lines, each cut to MAX_LINE_WIDTH characters (with one note per cut line)."""
    out = []
    for n, raw in enumerate(diff.splitlines(), 1):
        if len(raw) > MAX_LINE_WIDTH + 1:
            notes.append(f"diff line {n:,} has {len(raw):,} characters: the first {MAX_LINE_WIDTH:,} shown (capped)")
            raw = raw[: MAX_LINE_WIDTH + 1] + "…"
        out.append(raw)
    return out


def _diff_rows(lines: list[str], lang: str) -> list[dict]:
    rows: list[dict[str, Any]] = []
    old, new = 0, 0
    for raw in lines:
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


