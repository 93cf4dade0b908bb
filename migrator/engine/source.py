"""Reading source files safely: encodings, BOMs, binary detection and character columns."""

from __future__ import annotations

import ast
import codecs
import io
import re
import sys
import tokenize
import warnings
from dataclasses import dataclass
from functools import cached_property

LINE_BREAK = re.compile(r"\r\n|\r|\n")


def split_lines(text: str) -> tuple[str, ...]:
    """Lines as Python numbers them: only \\r\\n, \\r and \\n end a line (not form feeds or U+2028)."""
    lines = LINE_BREAK.split(text) if "\r" in text else text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return tuple(lines)


class UnreadableSource(Exception):
    """The file's bytes are not text we can scan; the message says why."""


@dataclass(frozen=True)
class SourceText:
    text: str
    known_lines: tuple[str, ...] | None  # the lines where the maker has them; else split on first use (`lines`)
    encoding: str

    @cached_property
    def lines(self) -> tuple[str, ...]:
        """The lines as Python numbers them (`split_lines`): split only for a file something is found or
        looked for in by line (most columns of an ASCII file need none)."""
        return self.known_lines if self.known_lines is not None else split_lines(self.text)

    @cached_property
    def lowered(self) -> str:
        """The text lowered, once for every search that ignores case (directives, markers)."""
        return self.text.lower()

    @cached_property
    def ascii(self) -> bool:
        """Whether the text is ASCII: every column is then its byte offset."""
        return self.text.isascii()

    def char_column(self, line: int, byte_offset: int) -> int:
        """1-based character column from ast's 0-based UTF-8 byte offset."""
        if self.ascii or line < 1 or line > len(self.lines):
            return byte_offset + 1
        text = self.lines[line - 1]
        if text.isascii():
            return byte_offset + 1
        return len(text.encode("utf-8")[:byte_offset].decode("utf-8", errors="ignore")) + 1

    def span(self, node: object) -> tuple[int, int, int, int]:
        """(line, column, end line, end column) of an `ast` node, columns in characters."""
        line = getattr(node, "lineno", 1)
        end = getattr(node, "end_lineno", None) or line
        return (line, self.char_column(line, getattr(node, "col_offset", 0)), end,
                self.char_column(end, getattr(node, "end_col_offset", None) or 0))


def decode_python(data: bytes) -> SourceText:
    if b"\x00" in data:
        raise UnreadableSource("contains NUL bytes (a binary file, not Python source)")
    if _plain(data):  # most files: `detect_encoding` would say UTF-8 if it decodes as such
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            pass  # the first lines may be what is wrong: said as `detect_encoding` says it, below
        else:
            return SourceText(text=text, known_lines=None, encoding="utf-8")
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
    except SyntaxError as exc:
        try:
            data.decode("utf-8")
        except UnicodeDecodeError as bad:
            line = data[: bad.start].count(b"\n") + 1
            raise UnreadableSource(
                f"not valid UTF-8 (byte 0x{data[bad.start]:02x} on line {line}) and no "
                "`# -*- coding: ... -*-` declaration"
            ) from None
        raise UnreadableSource(f"bad encoding declaration: {exc}") from None
    try:
        text = data.decode(encoding)
    except (UnicodeDecodeError, LookupError) as exc:
        raise UnreadableSource(f"cannot decode as {encoding}: {exc.__class__.__name__} ({exc})") from None
    if text.startswith("\ufeff"):
        text = text[1:]
    return SourceText(text=text, known_lines=None, encoding=encoding)


def _plain(data: bytes) -> bool:
    """No BOM, and no `coding` in the two lines `tokenize.detect_encoding` reads for a declaration."""
    if data.startswith(codecs.BOM_UTF8):
        return False
    first = data.find(b"\n")
    end = -1 if first < 0 else data.find(b"\n", first + 1)
    return b"coding" not in (data if end < 0 else data[:end])


def decode_text(data: bytes) -> SourceText:
    if b"\x00" in data:
        raise UnreadableSource("contains NUL bytes (a binary file, not text)")
    for encoding in ("utf-8-sig", "latin-1"):
        try:
            text = data.decode(encoding)
            return SourceText(text=text, known_lines=None, encoding=encoding)
        except UnicodeDecodeError:
            continue
    raise UnreadableSource("cannot decode as text")  # pragma: no cover - latin-1 never fails


@dataclass(frozen=True)
class ParseFailure:
    """Why a Python file could not be parsed, and where (1-based)."""

    why: str
    line: int = 1
    column: int = 1


def parse_python(data: bytes, rel: str) -> ast.Module | ParseFailure:
    """The module's `ast` (warnings such as invalid escapes silenced: not our business), or why not."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return ast.parse(data, filename=rel)
    except SyntaxError as exc:
        hint = " (Python 2 code?)" if _looks_like_python2(exc) else ""
        return ParseFailure(f"{exc.msg}{hint}", exc.lineno or 1, max(exc.offset or 1, 1))
    except (ValueError, RecursionError, MemoryError) as exc:
        return ParseFailure(_parse_failure(exc))


# Pythons on which a symbol table built at half the recursion limit was measured to give up before `ast.parse` does
# on a deep expression (3.12 and later count both against the C stack: there the tree is always built)
SYNTAX_ONLY = sys.version_info[:2] in ((3, 10), (3, 11))


def parses(data: bytes) -> bool:
    """True when `parse_python(data, ...)` is sure to give a module, found without building the tree: the
    parser and the symbol table's pass, about a third cheaper. False is "not known" (the symbol table
    rejects more than the parser, e.g. `nonlocal x` at module level): ask `parse_python`."""
    if not SYNTAX_ONLY:
        return False
    import _symtable  # type: ignore[import-not-found]

    limit = sys.getrecursionlimit()
    try:  # at half the limit it gives up first on a deep expression, where `ast.parse`'s tree would
        sys.setrecursionlimit(limit // 2)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            _symtable.symtable(data, "<scan>", "exec")
        return True
    except Exception:  # noqa: BLE001 - any refusal: `parse_python` says what it is
        return False
    finally:
        sys.setrecursionlimit(limit)

def _parse_failure(exc: BaseException) -> str:
    """Why `ast.parse` gave up (CPython's parser raises an empty MemoryError on deep nesting)."""
    if isinstance(exc, MemoryError):
        return "nested too deeply for Python's parser (MemoryError)"
    return str(exc) or type(exc).__name__

def _looks_like_python2(exc: SyntaxError) -> bool:
    text = (exc.text or "") + (exc.msg or "")
    return bool(re.search(r"\bprint\s+[^(=\s]|Missing parentheses|except\s+\w+\s*,|\bexec\s+\"|\d+L\b|ur\"", text))
