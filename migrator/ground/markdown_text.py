"""Text made safe for Markdown (PR comments, tables): code spans, fences, quotes, headings."""

from __future__ import annotations

import re
from typing import Any

from migrator.ground.safe_text import visible

_CODE_SPAN = re.compile(r"(`+)(.+?)\1", re.S)


def _md_text(text: str) -> str:
    return (
        text.replace("\\", "\\\\")
        .replace("&", "&amp;")
        .replace("<", "&lt;")
        .replace(">", "&gt;")
        .replace("|", "\\|")
        .replace("@", "&#64;")
        .replace("*", "\\*")
        .replace("_", "\\_")
        .replace("[", "\\[")
        .replace("]", "\\]")
    )


def md_cell(text: Any) -> str:
    """Our messages (with `code` spans) safe in a table cell: no HTML, no mentions, no pipes."""
    text = visible(str(text).replace("\r", " ").replace("\n", " "))
    out, pos = [], 0
    for m in _CODE_SPAN.finditer(text):
        out.append(_md_text(text[pos : m.start()]))
        out.append(m.group(1) + m.group(2).replace("|", "\\|") + m.group(1))
        pos = m.end()
    out.append(_md_text(text[pos:]))
    return "".join(out)


def md_code(text: Any) -> str:
    """Arbitrary text (a path, a symbol) as an inline code span that nothing can break out of."""
    text = visible(str(text).replace("\r", " ").replace("\n", " ")).replace("|", "\\|")
    longest = max((len(m) for m in re.findall(r"`+", text)), default=0)
    ticks = "`" * (longest + 1)
    pad = " " if text.startswith("`") or text.endswith("`") or not text.strip() else ""
    return f"{ticks}{pad}{text}{pad}{ticks}"


def fence(text: str, lang: str = "") -> str:
    """A fenced code block whose fence is longer than any backtick run inside it."""
    text = visible(text.replace("\r\n", "\n").replace("\r", "\n"))
    longest = max((len(m) for m in re.findall(r"`{3,}", text)), default=0)
    ticks = "`" * max(3, longest + 1)
    return f"{ticks}{lang}\n{text.rstrip(chr(10))}\n{ticks}"


def quote_md(text: str) -> str:
    return "\n".join("> " + line if line else ">" for line in text.strip().splitlines())


def shift_headings(md: str, by: int) -> str:
    """Demote Markdown headings by `by` levels (outside fenced code)."""
    out, in_fence = [], False
    for line in md.splitlines():
        if line.startswith("```"):
            in_fence = not in_fence
        elif not in_fence and re.match(r"#{1,6} ", line):
            level = min(6, len(line) - len(line.lstrip("#")) + by)
            line = "#" * level + line.lstrip("#")
        out.append(line)
    return "\n".join(out) + "\n"
