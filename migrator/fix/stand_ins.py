"""Parse with libcst only the statements that hold work.

libcst's parse is the largest part of fixing a module, and most of a changed module's statements hold no
site (a 2,000-line class around the method with one `.cuda()`). In the text libcst parses, each statement
without work, at any depth, is replaced by a stand-in of as many lines at its indentation: a name assigned
a triple-quoted string of that many newlines, one token whatever the statement held (at the top level
under `if 0:`, indented as the statement's first block is, where it opens one: libcst takes the module's
indentation unit from the first indented line). Once parsed, each stand-in becomes a `SourceStatement`:
the fixer never walks into it (`positions`: no work) and it renders as the statement's own source text, so
the output is the same. Lines keep their numbers, so `ast`'s positions hold for what is parsed.

Not stood in for: imports and a `try` importing something (the imports added, sorted, bound and removed
are judged on them), the module docstring (nothing goes above it; a stand-in is never a string expression),
a `match` (its first indented line is a `case`), a compound statement followed by comment lines indented
past it (libcst gives those to its last block), and what shares a line with another statement or ends in
a `\\`. What fix reads of the whole module outside the walk: the names it uses (import removal, helpers,
`torch_npu`), asked by `StandIns.mentions` (a name spelled in no stand-in has the same uses with them), and
its functions in source order (`SourceStatement.functions`). Anything else raises `WholeModuleNeeded`: the
module is fixed again over its whole parse (`python_fixer.fix_python`).
"""

from __future__ import annotations

import ast
import bisect
import copy
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
    """A statement without work, as libcst holds it once parsed: its leading lines, then its source text from
    its first line (indentation included) to its newline. Never walked into (it holds nothing to walk)."""

    source: str = ""
    indent: str = ""  # where it stands: elsewhere (moved into another block) its text would be wrong
    functions: tuple[str, ...] = ()  # the functions it defines, in source order (the import removal numbers them)

    def _visit_and_replace_children(self, visitor: Any) -> SourceStatement:
        return self

    def _codegen_impl(self, state: Any) -> None:
        for line in self.leading_lines:
            line._codegen(state)
        if "".join(state.indent_tokens) != self.indent:
            raise WholeModuleNeeded  # moved by a fix: only the parsed statement can be indented anew
        state.add_token(self.source)
        if not self.source.endswith(("\n", "\r")):  # the file's last line: the newline libcst drops at its end
            state.add_token(state.default_newline)


def _is_stand_in(stmt: cst.CSTNode) -> bool:
    if isinstance(stmt, cst.If) and isinstance(stmt.test, cst.Integer) and isinstance(stmt.body, cst.IndentedBlock):
        return len(stmt.body.body) == 1 and _is_stand_in(stmt.body.body[0])  # `if 0:` over one
    if not isinstance(stmt, cst.SimpleStatementLine) or len(stmt.body) != 1 or not isinstance(stmt.body[0], cst.Assign):
        return False
    target = stmt.body[0].targets[0].target
    return isinstance(target, cst.Name) and target.value == NAME


@dataclass(frozen=True)
class StandIns:
    text: str  # what libcst parses: the source with each statement without work stood in for
    body: list[ast.stmt]  # the top level as libcst sees it, a `Pass` spanning each stand-in (blocks copied likewise)
    sources: tuple[tuple[str, str, tuple[str, ...]], ...]  # (source text, indentation, functions) of each, in order

    def mentions(self, names: Iterable[str]) -> bool:
        """Whether a name of `names` is spelled in a statement stood in for (else none of its uses is there)."""
        words = [re.escape(name) for name in names]
        if not words:
            return False
        spelled = re.compile(rf"\b(?:{'|'.join(words)})\b")
        return any(spelled.search(source) for source, _, _ in self.sources)

    def install(self, module: cst.Module) -> cst.Module:
        """`module` (parsed from `text`) with each stand-in a `SourceStatement`."""
        installer = _Installer(self.sources)
        body = installer.statements(module.body)
        if installer.count != len(self.sources) or len(body) != len(self.body):
            raise WholeModuleNeeded  # not the statements `ast` found
        return module.with_changes(body=body)


class _Installer:
    """Puts each stand-in's `SourceStatement` in its place, in source order."""

    def __init__(self, sources: Sequence[tuple[str, str, tuple[str, ...]]]):
        self.sources = iter(sources)
        self.count = 0

    def statements(self, body: Sequence[Any]) -> list[Any]:
        new = []
        for stmt in body:
            if _is_stand_in(stmt):
                self.count += 1
                source, indent, functions = next(self.sources, ("", "", ()))
                stmt = SourceStatement(body=[cst.Expr(cst.Name(NAME))], leading_lines=stmt.leading_lines,
                                       source=source, indent=indent, functions=functions)
            elif isinstance(stmt, cst.BaseCompoundStatement):
                stmt = self.compound(stmt)
            new.append(stmt)
        return new

    def suite(self, node: Any) -> Any:
        """An indented block, or a part (else, except, finally) holding one, with its stand-ins in place."""
        block = node if isinstance(node, cst.BaseSuite) else node.body
        if not isinstance(block, cst.IndentedBlock):
            return node
        new = block.with_changes(body=self.statements(block.body))
        return new if node is block else node.with_changes(body=new)

    def compound(self, stmt: Any) -> Any:
        if isinstance(stmt, cst.Match):
            return stmt  # never stood in for inside (`_Builder.compound`)
        changes: dict[str, Any] = {"body": self.suite(stmt.body)}
        orelse = getattr(stmt, "orelse", None)
        if orelse is not None:
            changes["orelse"] = self.compound(orelse) if isinstance(orelse, cst.If) else self.suite(orelse)
        if isinstance(stmt, (cst.Try, cst.TryStar)):
            changes["handlers"] = [self.suite(h) for h in stmt.handlers]
            if stmt.finalbody is not None:
                changes["finalbody"] = self.suite(stmt.finalbody)
        return stmt.with_changes(**changes)


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


def _stand_in(lines: _Lines, first: int, last: int, indent: str, opens: str = "") -> str:
    """`first`..`last` as one statement of as many lines; under `if 0:` with its string `opens` indented."""
    newlines = _NEWLINE.findall(lines.text, lines.starts[first - 1], lines.end(last))  # each line's own
    if opens:  # libcst meets this indented line where the source has one
        return "if 0:" + newlines[0] + opens + _stand_in(lines, first + 1, last, opens)
    return f"{NAME} = 0" if not newlines else f"{NAME} = '''" + "".join(newlines) + "'''"


class _Builder:
    """The stand-in text and, for `positions`, the `ast` statements as libcst will find them."""

    def __init__(self, text: str, work_lines: Sequence[int]):
        self.lines = _Lines(text)
        self.work_lines = work_lines
        self.parts: list[str] = []
        self.done = 0  # offset of the text copied so far
        self.sources: list[tuple[str, str, tuple[str, ...]]] = []  # (source text, indentation, functions) of each

    def _has_work(self, first: int, last: int) -> bool:
        at = bisect.bisect_left(self.work_lines, first)
        return at < len(self.work_lines) and self.work_lines[at] <= last

    def block(self, nodes: Sequence[ast.stmt], indent: str) -> list[ast.stmt]:
        """`nodes` (a block at `indent`) with a `Pass` spanning each statement stood in for."""
        out: list[ast.stmt] = []
        for index, group in enumerate(_groups(nodes)):
            first, last = _first_line(group[0]), max(n.end_lineno or n.lineno for n in group)
            if self._has_work(first, last):
                out.extend([self.compound(group[0])] if isinstance(group[0], _COMPOUND) else group)
                continue
            opens = self._stand_in_form(group, index, indent, first, last)
            if opens is None:
                out.extend(group)
                continue
            lines = self.lines
            start = lines.starts[first - 1]
            self.parts += [lines.text[self.done:start + len(indent)], _stand_in(lines, first, last, indent, opens)]
            self.done = lines.end(last)
            out.append(ast.Pass(lineno=first, end_lineno=last, col_offset=len(indent), end_col_offset=len(indent)))
            functions = tuple(_functions(group, [])) if isinstance(group[0], _COMPOUND) else ()
            self.sources.append((lines.text[start:lines.starts[last] if last < len(lines.starts) else len(lines.text)],
                                 indent, functions))
        return out

    def _stand_in_form(self, group: list[ast.stmt], index: int, indent: str, first: int, last: int) -> str | None:
        """None where the statement is parsed as it is; else the indentation of the `if 0:` block its stand-in
        opens ("" for a plain one)."""
        lines, node = self.lines, group[0]
        line = lines.line(first)
        if line[:len(indent)] != indent or line[len(indent):len(indent) + 1] in ("", " ", "\t"):
            return None
        if (not indent and _kept(group, index)) or any(isinstance(n, (ast.Import, ast.ImportFrom)) for n in group):
            return None
        if isinstance(node, _TRY) and any(isinstance(n, (ast.Import, ast.ImportFrom)) for n in node.body):
            return None
        if not _ends_cleanly(lines, group[-1]):
            return None
        if not isinstance(node, _COMPOUND):
            return ""
        # a compound statement's blocks keep the comment lines after it indented past the statement (their footer)
        for number in range(last + 1, len(lines.starts) + 1):
            after = lines.line(number)
            code = after.lstrip(" \t\f")
            if code and not code.startswith("#"):
                break
            if len(after) - len(code) > len(indent):
                return None
        return "" if indent else _first_indent(lines, node)

    def compound(self, node: ast.stmt) -> ast.stmt:
        """A copy of `node` whose indented blocks are the `block`s of its statements (`match` left whole)."""
        if isinstance(node, ast.Match):
            return node
        new = copy.copy(node)
        new.body = self._suite(node.body)  # type: ignore[attr-defined]
        if getattr(node, "handlers", None):
            new.handlers = [self._handler(h) for h in node.handlers]  # type: ignore[attr-defined]
        orelse = getattr(node, "orelse", None)
        if orelse and isinstance(orelse[0], ast.If) and len(orelse) == 1 and self.lines.line(orelse[0].lineno).lstrip().startswith("elif"):
            elif_ = orelse[0]
            new.orelse = [self.compound(elif_) if self._has_work(elif_.lineno, elif_.end_lineno or elif_.lineno) else elif_]  # type: ignore[attr-defined]
        elif orelse:
            new.orelse = self._suite(orelse)  # type: ignore[attr-defined]
        if getattr(node, "finalbody", None):
            new.finalbody = self._suite(node.finalbody)  # type: ignore[attr-defined]
        return new

    def _handler(self, handler: ast.excepthandler) -> ast.excepthandler:
        new = copy.copy(handler)
        new.body = self._suite(handler.body)  # type: ignore[attr-defined]
        return new

    def _suite(self, block: list[ast.stmt]) -> list[ast.stmt]:
        """The block's statements; an indented block's with stand-ins, a one-line block's as they are."""
        first = block[0]
        prefix = self.lines.line(first.lineno)[:first.col_offset]
        if not prefix or prefix.strip() or self.lines.line(first.lineno - 1).endswith("\\"):
            return block
        return self.block(block, prefix)


def stand_ins(text: str, tree: ast.Module, work_lines: Sequence[int]) -> StandIns | None:
    """The text for libcst with each statement that holds none of `work_lines` (sorted) stood in for, where
    it can be; None where none can."""
    if NAME in text:
        return None
    builder = _Builder(text, work_lines)
    body = builder.block(tree.body, "")
    if not builder.sources:
        return None
    builder.parts.append(text[builder.done:])
    return StandIns("".join(builder.parts), body, tuple(builder.sources))
