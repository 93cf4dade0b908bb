"""Parse with libcst only the top-level statements that hold work.

libcst's parse is the largest part of fixing a module, and most of a changed module's top-level statements
hold no site (a 2,000-line class beside the function with one `.cuda()`). In the text libcst parses, each
such statement is replaced by a stand-in of as many lines: a name assigned a triple-quoted string of that
many newlines, one token whatever the statement held (under `if 0:`, indented as the statement's first
block is, where the statement opens one: libcst takes the module's indentation unit from the first indented
line). The fixer never walks into it (`positions`: no work), and `python_fixer.render` emits it as the
statement's own source text, so the output is the same. Lines keep their numbers, so `ast`'s positions
hold for the statements that are parsed.

What fix reads of the module as a whole outside the walk stays exact: imports and a `try` holding one are
parsed (the imports added, sorted and bound are judged on them), and so is a module docstring (nothing is
inserted above it); a stand-in is never a string expression, so never taken for one. Where fix would read
more (the names the module uses, its functions, its text), `WholeModuleNeeded` sends it to the whole parse.
"""

from __future__ import annotations

import ast
import bisect
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import libcst as cst

_NEWLINE = re.compile(r"\r\n?|\n")
_LINE_REST = re.compile(r"[ \t]*(?:#[^\r\n]*)?")  # what may follow a statement on its last line
_COMPOUND = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.If, ast.For, ast.AsyncFor, ast.While,
             ast.With, ast.AsyncWith, ast.Try, ast.Match, *((ast.TryStar,) if hasattr(ast, "TryStar") else ()))
_TRY = (ast.Try, *((ast.TryStar,) if hasattr(ast, "TryStar") else ()))
NAME = "_migrate_stand_in"


class WholeModuleNeeded(Exception):
    """Fix reads something of the whole module that stand-ins do not keep: parse it all."""


@dataclass(frozen=True)
class SourceStatement(cst.SimpleStatementLine):
    """A top-level statement without work, as libcst holds it once parsed: its leading lines, then its
    source text from its first line to its newline. Never walked into (it holds nothing to walk)."""

    source: str = ""
    functions: tuple[str, ...] = ()  # the functions it defines, in source order (the import removal numbers them)

    def _visit_and_replace_children(self, visitor: Any) -> SourceStatement:
        return self

    def _codegen_impl(self, state: Any) -> None:
        for line in self.leading_lines:
            line._codegen(state)
        state.add_token(self.source)


@dataclass(frozen=True)
class StandIns:
    text: str  # what libcst parses: the source with each top-level statement without work stood in for
    body: list[ast.stmt]  # the top level as libcst sees it: a statement's `ast` nodes, or one node per stand-in
    at: tuple[int, ...]  # the index of each stand-in in `body`
    sources: tuple[str, ...]  # each one's source text
    functions: tuple[tuple[str, ...], ...]  # the functions each defines

    def mentions(self, names: Iterable[str]) -> bool:
        """Whether a name of `names` is spelled in a statement stood in for (else none of its uses is there)."""
        words = [re.escape(name) for name in names]
        if not words:
            return False
        spelled = re.compile(rf"\b(?:{'|'.join(words)})\b")
        return any(spelled.search(source) for source in self.sources)

    def install(self, module: cst.Module) -> cst.Module:
        """`module` (parsed from `text`) with each stand-in its `SourceStatement`."""
        body = list(module.body)
        if len(body) != len(self.body):
            raise WholeModuleNeeded  # not the statements `ast` found
        for at, source, functions in zip(self.at, self.sources, self.functions):
            body[at] = SourceStatement(body=[cst.Pass()], leading_lines=body[at].leading_lines, source=source,
                                       functions=functions)
        return module.with_changes(body=body)


def _functions(body: Sequence[ast.stmt], found: list[str]) -> list[str]:
    """The functions defined in `body`, in source order (as a libcst walk meets them)."""
    for node in body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            found.append(node.name)
        for name in ("body", "handlers", "orelse", "finalbody", "cases"):
            for inner in getattr(node, name, None) or ():
                _functions(inner.body if isinstance(inner, (ast.ExceptHandler, ast.match_case)) else [inner], found)
    return found


def _first_line(node: ast.stmt) -> int:
    return min([node.lineno, *(d.lineno for d in getattr(node, "decorator_list", ()))])


def _groups(body: Sequence[ast.stmt]) -> list[list[ast.stmt]]:
    """The `ast` nodes of each libcst top-level statement: simple statements on one line (`a = 1; b = 2`) are one."""
    groups: list[list[ast.stmt]] = []
    for node in body:
        if groups and node.lineno == groups[-1][-1].end_lineno and not isinstance(node, _COMPOUND):
            groups[-1].append(node)
        else:
            groups.append([node])
    return groups


def _kept(group: list[ast.stmt], index: int) -> bool:
    """Whether the statement is parsed whatever it holds: what fix reads of the top level after the walk."""
    node = group[0]
    if index == 0 and isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
        return True  # the module docstring
    if any(isinstance(n, (ast.Import, ast.ImportFrom)) for n in group):
        return True
    if isinstance(node, _TRY) and any(isinstance(n, (ast.Import, ast.ImportFrom)) for n in node.body):
        return True
    return isinstance(node, ast.Match)  # its first indented line may be a `case`, not a statement


class _Lines:
    def __init__(self, text: str):
        self.text = text
        self.starts = [0] + [m.end() for m in _NEWLINE.finditer(text)]

    def end(self, line: int) -> int:
        """Offset of the end of `line` (1-based), before its newline."""
        if line >= len(self.starts):
            return len(self.text)
        at = self.starts[line]
        return at - 2 if self.text[at - 2:at] == "\r\n" else at - 1

    def line(self, number: int) -> str:
        return self.text[self.starts[number - 1]:self.end(number)]

    def newline_after(self, number: int) -> str:
        return self.text[self.end(number):self.starts[number]]


def _ends_cleanly(lines: _Lines, node: ast.stmt) -> bool:
    """Nothing but a comment after the statement on its last line (no `;`, no `\\`)."""
    last = lines.line(node.end_lineno or node.lineno)
    column = len(last.encode("utf-8")[:node.end_col_offset or 0].decode("utf-8", "replace"))
    return _LINE_REST.fullmatch(last, column) is not None


def _first_indent(lines: _Lines, node: ast.stmt) -> str | None:
    """The indentation of the statement's first indented line (where the tokenizer opens its first block:
    the first block, in source order, not on its header's line), "" when every block is on its header's
    line, None when that cannot be told here (a line continued by a backslash)."""
    handlers = [h.body for h in getattr(node, "handlers", ())]
    for block in (node.body, *handlers, getattr(node, "orelse", []), getattr(node, "finalbody", [])):  # type: ignore[attr-defined]
        if not block:
            continue
        inner = block[0]
        prefix = lines.line(inner.lineno)[:inner.col_offset]
        if prefix and not prefix.strip():
            return None if lines.line(inner.lineno - 1).endswith("\\") else prefix
        if isinstance(inner, ast.If) and block is getattr(node, "orelse", None):  # an `elif`
            found = _first_indent(lines, inner)
            if found != "":
                return found
    return ""


def _blank_or_comment(line: str) -> bool:
    return not line or line.startswith("#")


def _stand_in(lines: _Lines, first: int, last: int, indent: str) -> str:
    newlines = [lines.newline_after(n) for n in range(first, last)]
    if indent:  # `if 0:` over an indented string: libcst meets this indented line where the source has one
        body = f"{indent}0" if len(newlines) == 1 else f"{indent}'''" + "".join(newlines[1:]) + "'''"
        return "if 0:" + newlines[0] + body
    return f"{NAME} = 0" if not newlines else f"{NAME} = '''" + "".join(newlines) + "'''"


def stand_ins(text: str, tree: ast.Module, work_lines: Sequence[int]) -> StandIns | None:
    """The text for libcst with each top-level statement that holds none of `work_lines` (sorted) stood in
    for, where it can be; None where none can."""
    lines = _Lines(text)
    groups = _groups(tree.body)
    firsts = [_first_line(g[0]) for g in groups]
    body: list[ast.stmt] = []
    parts: list[str] = []
    at: list[int] = []
    sources: list[str] = []
    functions: list[tuple[str, ...]] = []
    done = 0  # offset of the text copied so far
    for index, group in enumerate(groups):
        first, last = firsts[index], max(n.end_lineno or n.lineno for n in group)
        next_work = bisect.bisect_left(work_lines, first)
        compound = isinstance(group[0], _COMPOUND)
        following = firsts[index + 1] if index + 1 < len(groups) else len(lines.starts) + 1
        indent = _first_indent(lines, group[0]) if compound else ""
        if (next_work < len(work_lines) and work_lines[next_work] <= last) or _kept(group, index) or lines.text[
                lines.starts[first - 1]:lines.starts[first - 1] + 1] in ("", " ", "\t") or not _ends_cleanly(lines, group[-1]) or (
                indent is None or compound and not all(_blank_or_comment(lines.line(n)) for n in range(last + 1, following))):
            # a compound statement's block keeps indented comment lines after it (its footer): not stood in for
            body.extend(group)
            continue
        start = lines.starts[first - 1]
        parts += [text[done:start], _stand_in(lines, first, last, indent)]
        done = lines.end(last)
        at.append(len(body))
        body.append(ast.Pass(lineno=first, end_lineno=last, col_offset=0, end_col_offset=0))
        sources.append(text[start:lines.starts[last] if last < len(lines.starts) else len(text)])
        functions.append(tuple(_functions(group, [])) if compound else ())
    if not at:
        return None
    parts.append(text[done:])
    return StandIns("".join(parts), body, tuple(at), tuple(sources), tuple(functions))
