"""Running catalogue examples through `migrate fix`, for the example tests."""

from __future__ import annotations

import ast
from pathlib import Path

from migrator import api

HELPER_PREFIXES = ("_migrate_", "_Migrate")


def without_helpers(text: str) -> str:
    """The fixed text without the runtime helpers a fix inserts (`def _migrate_*`, `class _Migrate*`):
    `fixed:` examples pin the rewrite of the site; the helpers are tested as code of their own."""
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return text
    lines = text.splitlines(keepends=True)
    drop: set[int] = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)) and node.name.startswith(HELPER_PREFIXES):
            first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
            drop.update(range(first - 1, node.end_lineno or node.lineno))
    kept = [line for i, line in enumerate(lines) if i not in drop]
    out: list[str] = []
    for line in kept:  # the blank lines that separated a dropped helper collapse
        if not line.strip() and out and not out[-1].strip():
            continue
        out.append(line)
    return "".join(out)


def fix_example(tmp_path: Path, code: str, file: str, target: str):
    """(text after `migrate fix`, the run's outcome) for one example file."""
    tmp_path.mkdir(parents=True, exist_ok=True)
    if file != "pyproject.toml":
        (tmp_path / "pyproject.toml").write_text("")
    path = tmp_path / file
    path.write_text(code)
    outcome = api.fix([path], root=tmp_path, target=target, use_cache=False)
    return path.read_text(), outcome
