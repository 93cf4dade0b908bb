"""Where an added import goes so that isort / ruff's `I` rules find nothing new in a sorted file.

isort's model (ruff follows it): the leading imports are sections (future, standard library, third
party, first party, local) separated by blank lines; inside a section `import x` lines come before
`from x import y` lines (unless `force-sort-within-sections`), each kind sorted by module name,
case-insensitively by default. An added line joins the block of its section at its sorted place, or
starts a block of its own where that section belongs. The repository's own settings are read from
`ruff.toml`, `.ruff.toml`, `pyproject.toml` (`[tool.ruff.lint.isort]`, `[tool.ruff.isort]`,
`[tool.isort]`), `.isort.cfg` or `setup.cfg` (`[isort]`); a file that was not sorted stays as unsorted
as it was, with the line next to its kind.
"""

from __future__ import annotations

import configparser
import re
import sys
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

if TYPE_CHECKING:
    import libcst as cst

FUTURE, STDLIB, THIRD_PARTY, FIRST_PARTY, LOCAL = range(5)


@dataclass(frozen=True)
class ImportStyle:
    force_sort_within_sections: bool = False
    case_sensitive: bool = False


def _flag(table: dict, *names: str) -> bool | None:
    for name in names:
        if isinstance(table.get(name), bool):
            return table[name]
    return None


def _style_from(table: dict) -> ImportStyle:
    return ImportStyle(
        force_sort_within_sections=bool(_flag(table, "force-sort-within-sections", "force_sort_within_sections")),
        case_sensitive=bool(_flag(table, "case-sensitive", "case_sensitive")),
    )


def _toml_table(path: Path, keys: tuple[str, ...]) -> dict | None:
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
        return None  # a broken config is the user's to fix; the default style applies
    for key in keys:
        if key in data:
            data = data[key]
            if not isinstance(data, dict):
                return None
        else:
            return None
    return data


@lru_cache(maxsize=64)
def read_style(root: Path) -> ImportStyle:
    """The import-sorting settings of the repository at `root` (isort's defaults when none)."""
    for name in ("ruff.toml", ".ruff.toml"):
        if (root / name).is_file():
            table = _toml_table(root / name, ("lint", "isort")) or _toml_table(root / name, ("isort",))
            return _style_from(table or {})
    pyproject = root / "pyproject.toml"
    if pyproject.is_file():
        for keys in (("tool", "ruff", "lint", "isort"), ("tool", "ruff", "isort"), ("tool", "isort")):
            table = _toml_table(pyproject, keys)
            if table is not None:
                return _style_from(table)
    for name, section in ((".isort.cfg", "settings"), (".isort.cfg", "isort"), ("setup.cfg", "isort")):
        parser = configparser.ConfigParser()
        try:
            parser.read(root / name, encoding="utf-8")
        except (configparser.Error, UnicodeDecodeError):
            continue
        if parser.has_section(section):
            values = parser[section]
            return ImportStyle(
                force_sort_within_sections=values.get("force_sort_within_sections", "").lower() in ("true", "1"),
                case_sensitive=values.get("case_sensitive", "").lower() in ("true", "1"),
            )
    return ImportStyle()


def _dotted(node: cst.BaseExpression | None) -> str:
    import libcst as cst

    if node is None:
        return ""
    if isinstance(node, cst.Name):
        return node.value
    if isinstance(node, cst.Attribute):
        return f"{_dotted(node.value)}.{node.attr.value}"
    return ""


@dataclass(frozen=True)
class _Line:
    module: str
    is_from: bool
    level: int


def _describe(stmt: cst.CSTNode) -> _Line | None:
    import libcst as cst

    if not isinstance(stmt, cst.SimpleStatementLine) or len(stmt.body) != 1:
        return None
    small = stmt.body[0]
    if isinstance(small, cst.Import):
        return _Line(_dotted(small.names[0].name), False, 0)
    if isinstance(small, cst.ImportFrom):
        return _Line(_dotted(small.module), True, len(small.relative))
    return None


def section_of(line: _Line) -> int:
    """The section a line belongs to, as far as the text tells (a non-stdlib absolute import is
    third party: first party needs the tree, and the caller knows its own line's)."""
    if line.level:
        return LOCAL
    top = line.module.split(".")[0]
    if top == "__future__":
        return FUTURE
    if top in sys.stdlib_module_names:
        return STDLIB
    return THIRD_PARTY


def _key(line: _Line, style: ImportStyle) -> tuple:
    module = line.module if style.case_sensitive else line.module.lower()
    # natural order, as isort and ruff compare: "torch" < "torch.nn" < "torch_npu"
    parts = tuple((0, int(p)) if p.isdigit() else (1, p) for p in re.split(r"(\d+)", module) if p)
    return (parts,) if style.force_sort_within_sections else (line.is_from, parts)


def _blocks(body: list[Any], start: int, end: int) -> list[tuple[int, int]]:
    """[start, end) index ranges of the blank-line separated blocks of the leading imports."""
    out: list[tuple[int, int]] = []
    i = start
    while i < end:
        j = i + 1
        while j < end and not _blank_before(body[j]):
            j += 1
        out.append((i, j))
        i = j
    return out


def _blank_before(stmt: cst.BaseStatement) -> bool:
    return any(line.comment is None for line in getattr(stmt, "leading_lines", ()))


def insert_sorted(body: list[Any], stmt: cst.SimpleStatementLine, start: int, end: int,
                  style: ImportStyle, section: int | None = None) -> int:
    """Insert `stmt` into `body[start:end]` (the leading imports); returns its index."""
    import libcst as cst

    line = _describe(stmt)
    assert line is not None
    wanted = section_of(line) if section is None else section
    blocks = _blocks(body, start, end)
    described = [[_describe(s) for s in body[a:b]] for a, b in blocks]
    sections = [_block_section(lines) for lines in described]
    third = [k for k, sec in enumerate(sections) if sec == THIRD_PARTY]
    for k in third[1:]:  # a later block of absolute non-stdlib imports: the tree's own modules
        sections[k] = FIRST_PARTY
    same = [k for k, s in enumerate(sections) if s == wanted]
    if wanted == THIRD_PARTY:  # the block holding torch is third party whatever else is in it
        torch = [k for k, lines in enumerate(described)
                 if any(x and x.module.split(".")[0] == "torch" and not x.level for x in lines)]
        same = torch or same
    if same:
        a, b = blocks[same[0]]
        at = b
        for i in range(a, b):
            other = _describe(body[i])
            if other is not None and _key(line, style) < _key(other, style):
                at = i
                break
        if at == a:  # the new first line of the block takes over its blank lines
            stmt = stmt.with_changes(leading_lines=body[a].leading_lines)
            body[a] = body[a].with_changes(leading_lines=())
        body.insert(at, stmt)
        return at
    # a block of its own, before the first block of a later section
    later = next((k for k, s in enumerate(sections) if s is not None and s > wanted), None)
    if later is None:
        at = end
        stmt = stmt.with_changes(leading_lines=[cst.EmptyLine()] if blocks else ())
    else:
        at = blocks[later][0]
        stmt = stmt.with_changes(leading_lines=body[at].leading_lines)
        body[at] = body[at].with_changes(leading_lines=[cst.EmptyLine()])
    body.insert(at, stmt)
    return at


def _block_section(lines: list[_Line | None]) -> int | None:
    known = [section_of(x) for x in lines if x is not None]
    return known[0] if known and all(s == known[0] for s in known) else (max(known) if known else None)
