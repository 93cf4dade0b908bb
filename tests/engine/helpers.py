from __future__ import annotations

import ast
from collections.abc import Iterable
from pathlib import Path

from migrator.engine.discover import file_kind
from migrator.engine.scan_file import ScanOptions, scan_file


def scan_text(tmp_path: Path, code: str, name: str = "example.py", **options):
    path = tmp_path / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(code, encoding="utf-8")
    return scan_file(path, name, file_kind(path) or "python", ScanOptions(**options))


def positions(result, code: str) -> list[str]:
    return [f"{f.line}:{f.column}" for f in result.findings if f.code == code]


def parsed_modules(texts: Iterable[str]) -> list[ast.Module]:
    """The modules among `texts` that parse (a corpus for tests that hold a shortcut to the code it replaced)."""
    out = []
    for text in texts:
        try:
            out.append(ast.parse(text))
        except SyntaxError:
            continue
    return out
