"""Reading scanned files back as lines, for fingerprints (baseline, SARIF) and report excerpts.

Never raises on bad bytes: undecodable bytes become U+FFFD, a missing or unreadable file is None.
Lines are split the way Python's parser counts them (`\\r\\n`, `\\r`, `\\n` only), so line numbers
agree with the findings' (``str.splitlines`` would also split on form feeds and U+2028).
"""

from __future__ import annotations

import io
import re
import tokenize
from pathlib import Path

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
    try:
        if path.stat().st_size > MAX_BYTES:
            return None
        data = path.read_bytes()
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
