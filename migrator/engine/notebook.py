"""Jupyter notebooks (nbformat 4): each code cell becomes a Python view and a shell view.

Cells are numbered from 1 over **all** cells (markdown and raw cells count), the way editors show
them, so `notebook.ipynb:cell 3:2:5` is the third cell, its second line, fifth character.

Per line of a code cell (IPython's own syntax, which `ast` cannot parse):

* `!cmd`, `x = !cmd` — shell escapes: checked by the shell checker (columns kept), `pass` in Python;
* `%env NAME=value`, `%set_env`, `%pip`/`%conda` installs, `%sx`/`%system` — shell view as well;
* any other `%magic`, `?help` / `obj?` — `pass` in Python (the cell still parses);
* a trailing backslash continues a magic onto the next line.

Cell magics (first line): `%%bash`/`%%sh`/`%%script bash` cells are shell; `%%time`,
`%%timeit`, `%%capture`, ... cells are Python below the magic; `%%writefile f.py` / `f.sh` bodies are
read as that kind; any other (`%%html`, `%%javascript`, `%%sql`, ...) cell is not read.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import PurePosixPath
from typing import Any

SHELL_ESCAPE = re.compile(r"^(?P<indent>[ \t]*)(?:[\w.]+(?:\s*,\s*[\w.]+)*\s*=\s*)?!!?")
LINE_MAGIC = re.compile(r"^(?P<indent>[ \t]*)(?:[\w.]+(?:\s*,\s*[\w.]+)*\s*=\s*)?%(?P<name>\w+)")
SHELL_MAGICS = {"env", "set_env", "pip", "conda", "mamba", "sx", "system"}
HELP = re.compile(r"^[ \t]*\?|^[ \t]*[^#\s][^#]*\?\??[ \t]*$")
PYTHON_CELL_MAGICS = {"time", "timeit", "capture", "prun", "debug", "python", "python3", "memit", "px", "pypy"}
SHELL_CELL_MAGICS = {"bash", "sh", "zsh", "!"}
NEWLINE = re.compile(r"\r\n|\r|\n")


class NotebookError(ValueError):
    def __init__(self, message: str, line: int = 1, column: int = 1):
        super().__init__(message)
        self.line = line
        self.column = column


@dataclass
class Cell:
    index: int  # 1-based among all cells
    kind: str  # "python" | "shell" | "skip" | "error"
    source: str  # the cell's source, joined
    source_is_list: bool
    python: str = ""  # kind python: the source with IPython syntax replaced by `pass`
    shell: tuple[str, ...] = ()  # per line: the shell command (columns kept) or ""
    special: frozenset[int] = frozenset()  # 1-based lines that are not Python
    error: str | None = None


@dataclass
class Notebook:
    data: dict
    cells: list[Cell] = field(default_factory=list)
    language: str | None = None


def split_lines(text: str) -> list[str]:
    """Lines with their endings (only \\r\\n, \\r, \\n end a line, as the Python tokenizer counts)."""
    out, pos = [], 0
    for m in NEWLINE.finditer(text):
        out.append(text[pos : m.end()])
        pos = m.end()
    if pos < len(text):
        out.append(text[pos:])
    return out


def _ending(line: str) -> str:
    m = NEWLINE.search(line)
    return m.group(0) if m else ""


def _body(line: str) -> str:
    return line[: len(line) - len(_ending(line))]


def cell_views(index: int, source: str, source_is_list: bool) -> Cell:
    lines = split_lines(source)
    bodies = [_body(line) for line in lines]
    cell = Cell(index, "python", source, source_is_list)
    first = bodies[0].strip() if bodies else ""
    python: list[str] = []
    shell: list[str] = []
    special: set[int] = set()
    start = 0
    if first.startswith("%%"):
        cell.kind = _cell_magic_kind(first)
        if cell.kind == "shell":
            cell.shell = ("", *bodies[1:])
            cell.special = frozenset(range(1, len(lines) + 1))
            return cell
        if cell.kind == "skip":
            return cell
        python, shell, special, start = ["pass" + _ending(lines[0])], [""], {1}, 1
    _line_views(lines, bodies, start, python, shell, special)
    cell.python = "".join(python)
    cell.shell = tuple(shell)
    cell.special = frozenset(special)
    return cell


def _cell_magic_kind(first: str) -> str:
    """What a `%%magic` first line makes of the cell: "shell", "python" or "skip"."""
    parts = first[2:].split()
    name = parts[0] if parts else ""
    if name in SHELL_CELL_MAGICS or (name == "script" and len(parts) > 1 and parts[1] in ("bash", "sh", "zsh")):
        return "shell"
    if name in PYTHON_CELL_MAGICS:
        return "python"
    if name == "writefile":
        target = next((p for p in parts[1:] if not p.startswith("-")), "")
        suffix = PurePosixPath(target).suffix.lower()
        return "python" if suffix == ".py" else "shell" if suffix in (".sh", ".bash", ".zsh") else "skip"
    return "skip"


def _line_views(
    lines: list[str], bodies: list[str], start: int, python: list[str], shell: list[str], special: set[int]
) -> None:
    """Append each line from `start` to the Python and shell views; IPython syntax lines go to `special`."""
    continued: bool | None = None  # None, or whether the magic being continued is shell
    lexer = _Lexer()
    for number in range(start, len(lines)):
        body, end = bodies[number], _ending(lines[number])
        if continued is not None:
            python.append(end)  # a blank line: the magic's own line already holds a `pass`
            shell.append(body if continued else "")
            special.add(number + 1)
            continued = continued if body.rstrip().endswith("\\") else None
            continue
        found = _ipython_line(body) if lexer.at_logical_start() else None
        if found is None:
            python.append(lines[number])
            shell.append("")
            lexer.feed(body)
            continue
        shell_text, indent = found
        shell.append(shell_text)
        python.append(indent + "pass" + end)
        special.add(number + 1)
        if body.rstrip().endswith("\\"):
            continued = bool(shell_text)


def _ipython_line(body: str) -> tuple[str, str] | None:
    """(shell view, indent) of a `!cmd`, `%magic` or `help?` line at a logical line start; None for Python."""
    escape = SHELL_ESCAPE.match(body)
    if escape:
        return " " * escape.end() + body[escape.end() :], escape.group("indent")
    magic = LINE_MAGIC.match(body)
    if magic:
        name = magic.group("name")
        if name in ("pip", "conda", "mamba"):
            text = " " * magic.start("name") + body[magic.start("name") :]  # `pip install ...`
        elif name in SHELL_MAGICS:
            text = " " * magic.end() + body[magic.end() :]
        else:
            text = ""
        return text, magic.group("indent")
    if HELP.match(body):
        return "", body[: len(body) - len(body.lstrip(" \t"))]
    return None


class _Lexer:
    """Just enough of Python's tokenizer to know whether a line starts a logical line: IPython
    only treats `!`, `%` and `?` as its syntax there, not inside brackets, strings or after `\\`."""

    def __init__(self) -> None:
        self.depth = 0
        self.string: str | None = None  # the open triple (or, after a `\\`, single) quote
        self.backslash = False

    def at_logical_start(self) -> bool:
        return self.depth == 0 and self.string is None and not self.backslash

    def feed(self, line: str) -> None:
        i, n = 0, len(line)
        self.backslash = False
        while i < n:
            c = line[i]
            if self.string is not None:
                if c == "\\":
                    i += 2
                    continue
                if line.startswith(self.string, i):
                    i += len(self.string)
                    self.string = None
                    continue
                i += 1
                continue
            if c == "#":
                break
            if c in "\"'":
                quote = line[i : i + 3] if line[i : i + 3] in ('"""', "'''") else c
                self.string = quote
                i += len(quote)
                continue
            if c in "([{":
                self.depth += 1
            elif c in ")]}":
                self.depth = max(self.depth - 1, 0)
            elif c == "\\" and i == n - 1:
                self.backslash = True
            i += 1
        if self.string is not None and len(self.string) == 1:
            # an unterminated one-quote string ends at the line end (unless the line continues)
            self.backslash = line.endswith("\\")
            self.string = None if not self.backslash else self.string


def read_notebook(text: str) -> Notebook:
    """Parse a notebook; NotebookError (with the JSON error position) when it is not one we read."""
    try:
        data: Any = json.loads(text)
    except json.JSONDecodeError as exc:
        raise NotebookError(f"invalid JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})", exc.lineno, exc.colno) from None
    except RecursionError:
        raise NotebookError("invalid JSON: nested too deeply") from None
    if not isinstance(data, dict) or not isinstance(data.get("cells"), list):
        raise NotebookError("not a Jupyter notebook (no top-level `cells` list)")
    version = data.get("nbformat")
    if version != 4:
        raise NotebookError(
            f"nbformat {version!r} notebooks are not read (only nbformat 4); convert with "
            "`jupyter nbconvert --to notebook --nbformat 4`"
        )
    metadata = data["metadata"] if isinstance(data.get("metadata"), dict) else {}
    language = None
    for section, key in (("kernelspec", "language"), ("language_info", "name")):
        value = metadata.get(section)
        if isinstance(value, dict) and isinstance(value.get(key), str):
            language = value[key].lower()
            break
    nb = Notebook(data, language=language)
    for index, raw in enumerate(data["cells"], 1):
        if not isinstance(raw, dict) or raw.get("cell_type") != "code":
            continue
        source = raw.get("source", "")
        if isinstance(source, list) and all(isinstance(s, str) for s in source):
            nb.cells.append(cell_views(index, "".join(source), True))
        elif isinstance(source, str):
            nb.cells.append(cell_views(index, source, False))
        else:
            nb.cells.append(Cell(index, "error", "", False, error="`source` is neither a string nor a list of strings"))
    return nb


def _imports_of(python: str) -> list[str]:
    """Top-level imports of a cell (also inside a top-level try), one line each."""
    import ast

    try:
        tree = ast.parse(python)
    except (SyntaxError, ValueError, RecursionError):
        return []
    out = []
    for stmt in tree.body:
        for node in [stmt, *(stmt.body if isinstance(stmt, ast.Try) else [])]:
            if isinstance(node, ast.Import) or (
                isinstance(node, ast.ImportFrom) and not node.level and node.module != "__future__"
            ):
                out.append(ast.unparse(node))
    return out


FUTURE = re.compile(r"^from\s+__future__\s+import", re.MULTILINE)


def import_headers(nb: Notebook) -> dict[int, str]:
    """Per Python cell, the imports of the *other* cells as a text to put above it.

    Cells share one namespace, so `torch` imported in cell 2 is `torch` in cell 5: the checker and the
    fixer read each cell below this header (its lines are dropped from findings and never edited)."""
    python = [c for c in nb.cells if c.kind == "python"]
    owners: dict[str, set[int]] = {}  # import line -> cells that have it, in first-seen order
    for c in python:
        for line in _imports_of(c.python):
            owners.setdefault(line, set()).add(c.index)
    headers = {}
    for c in python:
        if FUTURE.search(c.python):
            headers[c.index] = ""  # `from __future__` must stay first
            continue
        headers[c.index] = "".join(line + "\n" for line, cells in owners.items() if cells != {c.index})
    return headers


def cell_lines(text: str) -> dict[int, list[str]]:
    """Cell number -> the cell's source lines (without line endings), for baseline fingerprints and
    report excerpts of notebook findings (whose `line` counts within the cell). {} when unreadable."""
    try:
        nb = read_notebook(text)
    except NotebookError:
        return {}
    return {c.index: [_body(line) for line in split_lines(c.source)] for c in nb.cells}


def raw_line(text: str, cell: int, line: int) -> int | None:
    """The line of the notebook *file* holding line `line` of cell `cell` (1-based), for tools that
    can only point into the raw JSON (GitHub annotations, SARIF regions); None when unknown."""
    from migrator.engine.config_reader import ConfigParseError, LineIndex, parse_config

    try:
        parsed = parse_config(text, "json")
    except ConfigParseError:
        return None
    path = (0, "cells", cell - 1, "source")
    values = {e.path: e.scalar for e in parsed.entries if not e.is_key}
    index = LineIndex(text)
    if path in values:  # one string: its lines are escaped `\n`s on one JSON line
        return index.position(values[path].start)[0]
    element = values.get(path + (line - 1,))
    return index.position(element.start)[0] if element is not None else None


def is_python(nb: Notebook) -> bool:
    return nb.language is None or nb.language in ("python", "python3", "ipython", "ipython3")
