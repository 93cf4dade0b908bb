"""Reading scanned files back as lines, for fingerprints (baseline, SARIF) and report excerpts.

Never raises on bad bytes: undecodable bytes become U+FFFD, a missing or unreadable file is None.
Lines are split the way Python's parser counts them (`\\r\\n`, `\\r`, `\\n` only), so line numbers
agree with the findings' (``str.splitlines`` would also split on form feeds and U+2028).
"""

from __future__ import annotations

import io
import re
import tokenize
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from migrator.engine.config_reader import LineIndex

_NEWLINE = re.compile(r"\r\n|\r|\n")
MAX_BYTES = 8 * 1024 * 1024  # larger files are not read back (excerpts are for humans)


def decode(data: bytes, python: bool = True) -> str:
    encoding = "utf-8"
    if python:
        try:
            encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
        except SyntaxError:
            encoding = "utf-8"
    try:
        text = data.decode(encoding, errors="replace")
    except LookupError:
        text = data.decode("utf-8", errors="replace")
    return text[1:] if text.startswith("\ufeff") else text


def split_lines(text: str) -> list[str]:
    lines = _NEWLINE.split(text)
    if lines and lines[-1] == "":
        lines.pop()
    return lines


def read_lines(path: Path) -> list[str] | None:
    from migrator.ground.input_files import read_bytes

    try:
        data = read_bytes(path, MAX_BYTES)  # a regular file only: never a FIFO swapped in after the scan
    except (OSError, ValueError):
        return None
    return split_lines(decode(data, python=path.suffix.lower() in (".py", ".pyi", "")))


class SourceLines:
    """Lines of files under a root, read once each: ``SourceLines(root)("pkg/a.py") -> [...] | None``."""

    def __init__(self, root: str | Path):
        self.root = Path(root)
        self._cache: dict[str, list[str] | None] = {}

    def __call__(self, rel: str) -> list[str] | None:
        if rel not in self._cache:
            path = Path(rel) if Path(rel).is_absolute() else self.root / rel
            self._cache[rel] = read_lines(path)
        return self._cache[rel]

    def line(self, rel: str, number: int) -> str | None:
        lines = self(rel)
        if lines is None or not 1 <= number <= len(lines):
            return None
        return lines[number - 1]


# ---- notebooks: findings in a `.ipynb` carry `cell`, and `line`/`column` count within that cell


class NotebookView:
    """One notebook's text, read back: the cells' source lines, and where a cell position lies in the
    raw JSON file (for tools that can only point into the file: SARIF regions, GitHub annotations)."""

    def __init__(self, text: str):
        from migrator.engine.notebook import cell_lines

        self.text = text
        self.cells = cell_lines(text)
        self._strings: dict[tuple, int] | None = None  # (cell, element | None) -> offset of the opening quote
        self._index: LineIndex | None = None

    def line(self, cell: int, line: int) -> str | None:
        lines = self.cells.get(cell)
        return lines[line - 1] if lines is not None and 1 <= line <= len(lines) else None

    def raw_position(self, cell: int, line: int, column: int = 1) -> tuple[int, int] | None:
        """(line, column) in the notebook file of `column` on `line` of cell `cell`; None when unknown.
        Columns are exact for plain text; escapes (`\\"`, `\\u00e9`) are stepped over, not assumed."""
        from migrator.engine.config_reader import ConfigParseError, LineIndex, parse_config

        if self._strings is None:
            self._strings = {}
            try:
                parsed = parse_config(self.text, "json")
            except ConfigParseError:
                return None
            for e in parsed.entries:
                p = e.path
                if not e.is_key and len(p) in (4, 5) and p[:2] == (0, "cells") and p[3] == "source" and e.scalar.is_str:
                    self._strings[(p[2] + 1, p[4] if len(p) == 5 else None)] = e.scalar.start
            self._index = LineIndex(self.text)
        assert self._index is not None  # built with the string offsets above
        if (cell, None) in self._strings:  # one string: all lines on one JSON line, split by `\n` escapes
            start, want = self._strings[(cell, None)], line
        elif (cell, line - 1) in self._strings:  # a list: one element per line
            start, want = self._strings[(cell, line - 1)], 1
        else:
            return None
        offset = _json_string_offset(self.text, start, want, column)
        return self._index.position(start if offset is None else offset)


def _json_string_offset(text: str, start: int, line: int, column: int) -> int | None:
    """Offset in `text` of decoded (line, column) of the JSON string whose quote is at `start`
    (past the end of that line: the line's end)."""
    i, n, cur_line, cur_col = start + 1, len(text), 1, 1
    while i < n:
        if cur_line == line and cur_col == column:
            return i
        c = text[i]
        if c == '"':
            break
        step, newline = 1, False
        if c == "\\" and i + 1 < n:
            e = text[i + 1]
            step = 2
            if e == "u":
                step = 6
                try:
                    code = int(text[i + 2 : i + 6], 16)
                except ValueError:
                    code = 0
                if 0xD800 <= code <= 0xDBFF and text[i + 6 : i + 8] == "\\u":
                    step = 12  # a surrogate pair is one character
            elif e == "n":
                newline = True
            elif e == "r":
                newline = text[i + 2 : i + 4] != "\\n"  # `\r\n` is one line break, counted at the `\n`
        if newline:
            if cur_line == line:
                return i  # past the end of the wanted line
            cur_line, cur_col = cur_line + 1, 1
        else:
            cur_col += 1
        i += step
    return i if cur_line == line else None


class CellLines:
    """The source line a finding points at, through ``lines_of(path)``: for a notebook finding (one
    with a `cell`) the line of that cell, not the line of the JSON file. One parse per notebook."""

    def __init__(self, lines_of: Callable[[str], Sequence[str] | None]) -> None:
        self.lines_of = lines_of
        self._views: dict[str, NotebookView | None] = {}

    def notebook(self, path: str) -> NotebookView | None:
        if path not in self._views:
            lines = self.lines_of(path)
            self._views[path] = NotebookView("\n".join(lines) + "\n") if lines is not None else None
        return self._views[path]

    def line(self, path: str, line: int, cell: int | None = None) -> str | None:
        if cell is not None:
            view = self.notebook(path)
            return view.line(cell, line) if view is not None else None
        lines = self.lines_of(path)
        return lines[line - 1] if lines is not None and 1 <= line <= len(lines) else None

    def raw_position(self, path: str, cell: int, line: int, column: int = 1) -> tuple[int, int] | None:
        view = self.notebook(path)
        return view.raw_position(cell, line, column) if view is not None else None
