"""Fix notebook cells in place, touching nothing but the `source` of the cells that change.

Each code cell is fixed like a module: its Python view (IPython syntax replaced by `pass`, see
engine/notebook.py) through the Python fixer, its `!`/`%env` lines through the shell text fixer; the
Python fixer's line changes are merged back onto the real cell lines (a rewrite that would touch a
magic line is refused). For the npu target a notebook gets one `import torch_npu`, in the first cell
that imports torch (or the first changed cell), not one per cell.

The JSON is not re-serialised: only the changed `source` strings (or array elements) are replaced,
encoded the way the file encodes strings (`ensure_ascii` detected), with the array's own separators,
so outputs, metadata, cell ids, key order, indentation and the trailing newline stay byte-identical
and the git diff shows only the changed source lines. The result is re-parsed and compared with the
intended notebook before it is accepted.
"""

from __future__ import annotations

import ast
import difflib
import json
import re
from collections import defaultdict
from dataclasses import dataclass, field, replace

import libcst as cst

from migrator.catalogue.loader import Rule
from migrator.engine import config_reader
from migrator.engine.notebook import Cell, cell_views, import_headers, read_notebook, split_lines
from migrator.fix import text_fixer
from migrator.fix.context import FixContext
from migrator.fix.imports import ensure_module_imports
from migrator.ground.kinds import Target
from migrator.ground.model import Finding

TORCH_NPU_LINE = re.compile(r"^import torch_npu[ \t]*(#[^\r\n]*)?(\r\n|\r|\n)?$")
IMPORTS_TORCH_NPU = re.compile(r"^[ \t]*(import torch_npu\b|from torch_npu\b)", re.MULTILINE)
IMPORTS_TORCH = re.compile(r"^(import torch\b|from torch\b)", re.MULTILINE)
NON_ASCII_ESCAPE = re.compile(r"\\u(?:00[89a-fA-F][0-9a-fA-F]|0[1-9a-fA-F][0-9a-fA-F]{2}|[1-9a-fA-F][0-9a-fA-F]{3})")


class NotebookFixError(ValueError):
    pass


@dataclass
class NotebookFixResult:
    text: str
    applied: list[Finding]
    declined: list[tuple[Finding, str]]
    cells: dict[int, tuple[str, str]] = field(default_factory=dict)  # cell -> (source before, after)


def merge(view_before: str, view_after: str, real: str, special: frozenset[int], header: int = 0) -> str | None:
    """Apply the line changes between two Python views onto the real cell text.

    `view_before` is `header` lines of other cells' imports followed by the cell's Python view (as
    many lines as `real`); header lines are dropped, lines added anywhere are kept. None when a change
    touches a header line or a magic/shell line (`special`, 1-based cell lines)."""
    old, new, base = split_lines(view_before), split_lines(view_after), split_lines(real)
    if len(base) != len(old) - header:
        return None
    out: list[str] = []
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(a=old, b=new, autojunk=False).get_opcodes():
        if tag == "equal":
            out.extend(base[max(i1, header) - header : max(i2, header) - header])
            continue
        if any(n < header or n - header + 1 in special for n in range(i1, i2)):
            return None
        out.extend(new[j1:j2])
    return "".join(out)


def fix_notebook(text: str, findings: list[Finding], rules: dict[str, Rule], target: str) -> NotebookFixResult:
    nb = read_notebook(text)
    cells = {c.index: c for c in nb.cells}
    headers = import_headers(nb)
    by_cell: dict[int | None, list[Finding]] = defaultdict(list)
    for f in findings:
        by_cell[f.cell].append(f)
    applied: list[Finding] = []
    declined: list[tuple[Finding, str]] = []
    new_src: dict[int, str] = {}
    python_changed: set[int] = set()
    for index, fs in sorted(by_cell.items(), key=lambda item: item[0] or 0):
        cell = cells.get(index) if index is not None else None
        if index is None or cell is None or cell.kind not in ("python", "shell"):
            declined.extend((f, "no automatic fix for this part of the notebook") for f in fs)
            continue
        fixed = _fix_cell(cell, fs, headers.get(index, ""), rules, target)
        applied.extend(fixed.applied)
        declined.extend(fixed.declined)
        if fixed.python_changed:
            python_changed.add(index)
        if fixed.source != cell.source:
            new_src[index] = fixed.source
    if target == Target.NPU and python_changed:
        _one_torch_npu_import(nb.cells, new_src, min(python_changed))
    new_src = {i: s for i, s in new_src.items() if s != cells[i].source}
    if not new_src:
        return NotebookFixResult(text, applied, declined)
    new_text = rewrite_sources(text, nb.data, new_src)
    return NotebookFixResult(new_text, applied, declined, {i: (cells[i].source, s) for i, s in new_src.items()})


@dataclass(frozen=True)
class _CellFix:
    source: str  # the cell's text after its fixes (its own text when none applied)
    applied: list[Finding]
    declined: list[tuple[Finding, str]]
    python_changed: bool = False  # the Python fixer applied something in the cell


def _fix_cell(cell: Cell, findings: list[Finding], header: str, rules: dict[str, Rule], target: str) -> _CellFix:
    """One code cell: its shell lines through the text fixer, then its Python view through the Python
    fixer (after `header`, the imports of earlier cells), merged back onto the real lines."""
    shell_fs = [f for f in findings if cell.kind == "shell" or f.line in cell.special]
    py_fs = [f for f in findings if cell.kind == "python" and f.line not in cell.special]
    source = cell.source
    applied: list[Finding] = []
    declined: list[tuple[Finding, str]] = []
    if shell_fs:
        source, done, refused = text_fixer.fix_text(source, shell_fs, target)
        applied.extend(done)
        declined.extend(refused)
    if not py_fs:
        return _CellFix(source, applied, declined)
    python = _fix_cell_python(cell, source, py_fs, header, rules, target)
    return _CellFix(python.source, applied + python.applied, declined + python.declined, python.python_changed)


def _fix_cell_python(
    cell: Cell, source: str, findings: list[Finding], header: str, rules: dict[str, Rule], target: str
) -> _CellFix:
    from migrator.fix.python_fixer import fix_python

    h = header.count("\n")
    moved = [replace(f, line=f.line + h, end_line=f.end_line + h) for f in findings]
    back = {id(m): f for m, f in zip(moved, findings)}
    view = header + cell.python
    try:
        result = fix_python(view, moved, rules, target, False)
    except Exception as exc:  # noqa: BLE001 - one bad cell never stops the run
        why = f"internal fixer error ({exc.__class__.__name__}: {exc}); cell left unchanged"
        return _CellFix(source, [], [(f, why) for f in findings])
    merged, why = _merge_fixed_view(view, result.text, source, cell.special, h)
    if merged is None:
        return _CellFix(source, [], [(f, why) for f in findings])
    return _CellFix(
        merged,
        [back.get(id(f), f) for f in result.applied],
        [(back.get(id(f), f), reason) for f, reason in result.declined],
        bool(result.applied),
    )


def _merge_fixed_view(view: str, fixed: str, source: str, special: frozenset[int], header: int) -> tuple[str | None, str]:
    """The cell's text with the fixed view's line changes, or None and why they cannot be merged."""
    if fixed == view:
        return source, ""
    try:
        ast.parse(fixed)
        return merge(view, fixed, source, special, header), (
            "a rewrite would touch an IPython magic or shell line; cell left unchanged")
    except SyntaxError as exc:
        return None, f"the fixed cell would not parse ({exc.msg}, line {(exc.lineno or 1) - header}); cell left unchanged"


def _one_torch_npu_import(cells: list[Cell], new_src: dict[int, str], first_changed: int) -> None:
    """Drop the `import torch_npu` lines the fixer added per cell; add one where the notebook starts
    using torch (unless some cell already imports torch_npu)."""
    by_index = {c.index: c for c in cells}
    for index, src in list(new_src.items()):
        before = sum(1 for line in split_lines(by_index[index].source) if TORCH_NPU_LINE.match(line))
        kept, after = [], 0
        for line in split_lines(src):
            if TORCH_NPU_LINE.match(line):
                after += 1
                if after > before:
                    continue
            kept.append(line)
        new_src[index] = "".join(kept)
    current = {c.index: new_src.get(c.index, c.source) for c in cells if c.kind == "python"}
    if any(IMPORTS_TORCH_NPU.search(src) for src in current.values()):
        return
    entry = next((i for i in sorted(current) if i <= first_changed and IMPORTS_TORCH.search(current[i])), first_changed)
    original = by_index[entry]
    view = cell_views(entry, current[entry], original.source_is_list)
    if view.kind != "python":
        return
    ctx = FixContext(target="npu", aliases={}, needs_torch_npu=True)
    try:
        new_view = ensure_module_imports(cst.parse_module(view.python), ctx).code
    except cst.ParserSyntaxError:
        return
    merged = merge(view.python, new_view, current[entry], view.special)
    if merged is not None:
        new_src[entry] = merged


def _ensure_ascii(text: str) -> bool:
    """Whether the file escapes non-ASCII characters in strings (json.dumps' ensure_ascii)."""
    return bool(NON_ASCII_ESCAPE.search(text)) and text.isascii()


def _as_lines(source: str) -> list[str]:
    return source.splitlines(True)  # nbformat splits `source` this way


def rewrite_sources(text: str, data: dict, new_src: dict[int, str]) -> str:
    """Replace the `source` of the given cells (1-based) in the notebook text, nothing else."""
    parsed = config_reader.parse_config(text, "json")
    values = {e.path: e.scalar for e in parsed.entries if not e.is_key}
    ascii_only = _ensure_ascii(text)

    def dumps(value: str) -> str:
        return json.dumps(value, ensure_ascii=ascii_only)

    edits: list[tuple[int, int, str]] = []
    expected = json.loads(text)
    for index, src in new_src.items():
        path = (0, "cells", index - 1, "source")
        old = data["cells"][index - 1]["source"]
        if isinstance(old, str):
            scalar = values[path]
            edits.append((scalar.start, scalar.end, dumps(src)))
            expected["cells"][index - 1]["source"] = src
            continue
        new_list = _as_lines(src)
        expected["cells"][index - 1]["source"] = new_list
        elements = [values[path + (j,)] for j in range(len(old))]
        if len(new_list) == len(old):
            for scalar, before, after in zip(elements, old, new_list):
                if before != after:
                    edits.append((scalar.start, scalar.end, dumps(after)))
            continue
        start, end = parsed.containers[path]
        if elements:
            prefix = text[start + 1 : elements[0].start]
            suffix = text[elements[-1].end : end - 1]
            sep = text[elements[0].end : elements[1].start] if len(elements) > 1 else "," + prefix
        else:
            prefix, suffix, sep = "", "", ", "
        body = sep.join(dumps(line) for line in new_list)
        edits.append((start, end, "[" + (prefix + body + suffix if new_list else "") + "]"))
    new_text = config_reader.apply_edits(text, edits)
    if json.loads(new_text) != expected:
        raise NotebookFixError("re-reading the edited notebook shows other changes than the intended ones")
    return new_text
