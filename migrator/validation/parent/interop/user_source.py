"""The user's source files that a dump's stacks name, parsed once per version of the file."""

from __future__ import annotations

import ast
import functools
import os
from pathlib import Path


def source_tree(path: str | Path) -> ast.Module | None:
    """The file as a syntax tree; None where it cannot be read or parsed (a cause then says less, never
    fails). Cached by path, size and modification time, so a file rewritten between two reads is read again."""
    try:
        stat = os.stat(path)
    except (OSError, ValueError):
        return None
    return _parsed(str(path), stat.st_size, stat.st_mtime_ns)


@functools.lru_cache(maxsize=64)
def _parsed(path: str, size: int, mtime_ns: int) -> ast.Module | None:
    try:
        return ast.parse(Path(path).read_text(encoding="utf-8"))
    except (OSError, SyntaxError, ValueError, RecursionError, MemoryError):
        return None
