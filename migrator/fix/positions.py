"""Source positions of libcst nodes, computed only for the statements a fix may touch.

libcst's `PositionProvider` renders the whole module once with position tracking; on megatron-core
that was the largest single cost of `migrate fix` (a 2 000-line class with one `.cuda()` paid for
every token). Here only the statements that hold a line of work are rendered, each on its own,
starting where `ast` says it stands; a big compound statement (a class, a function, an `if`) is
rendered as its header plus, recursively, the statements of its blocks that hold work. Every
rendering must equal the source text at its line, or the whole module falls back to libcst's full
map. Statements without work are listed as skippable: the fixer does not walk into them.
"""

from __future__ import annotations

import ast
import bisect
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any, cast

import libcst as cst
from libcst.metadata import CodeRange, MetadataWrapper, PositionProvider
from libcst.metadata.position_provider import PositionProvidingCodegenState

_NEWLINE = re.compile(r"\r\n?|\n")
SMALL_STATEMENT_LINES = 25  # a compound statement this short is rendered whole
_END = "__migrate_header_end__"  # stands in for a block's body when only a header is rendered


@dataclass
class NodePositions:
    ranges: Mapping[cst.CSTNode, CodeRange]
    skipped: set[int] = field(default_factory=set)  # ids of statements with no work inside
    complete: bool = False  # libcst's full map (every node)
    # id -> (nested statement without work, its source text, the indentation it was cut at): what
    # `python_fixer.render` emits instead of rendering it again inside a rewritten statement
    cuts: dict[int, tuple[cst.CSTNode, str, str]] = field(default_factory=dict)


def full_positions(module: cst.Module) -> NodePositions:
    """libcst's map for every node. Generating the one provider directly skips the extra walk
    `MetadataWrapper.resolve` makes for its (here empty) batch of batchable providers."""
    wrapper = MetadataWrapper(module, unsafe_skip_copy=True)
    try:
        return NodePositions(cast(Mapping[cst.CSTNode, CodeRange], PositionProvider()._gen(wrapper)), complete=True)
    except (AttributeError, TypeError):  # a libcst without that internal: the public way
        return NodePositions(wrapper.resolve(PositionProvider), complete=True)


class _Misplaced(Exception):
    """A rendering did not match the source, or the trees did not pair up."""


def _pair(stmts: Sequence[cst.BaseStatement], nodes: Sequence[ast.stmt]) -> list[tuple[cst.BaseStatement, ast.stmt, int, int]]:
    """(statement, its first ast node, first syntactic line, last line) per libcst statement."""
    paired = []
    at = 0
    for stmt in stmts:
        count = len(stmt.body) if isinstance(stmt, cst.SimpleStatementLine) else 1
        group = nodes[at:at + count]
        if len(group) != count or count == 0:
            raise _Misplaced
        at += count
        decorators = getattr(group[0], "decorator_list", None)
        first = decorators[0].lineno if decorators else group[0].lineno
        paired.append((stmt, group[0], first, max(n.end_lineno or n.lineno for n in group)))
    if at != len(nodes):
        raise _Misplaced
    return paired


def _lines_before_first_token(node: cst.CSTNode) -> int:
    count = len(getattr(node, "leading_lines", ()))
    decorators: Sequence[cst.Decorator] = getattr(node, "decorators", ())
    if decorators:
        count += len(decorators[0].leading_lines)
    return count


def _header_only(stmt: Any) -> Any:
    """`stmt` with its first block replaced by a marker statement and no else/except parts."""
    block = stmt.body.with_changes(body=[cst.SimpleStatementLine([cst.Expr(cst.Name(_END))])], footer=[])
    changes: dict[str, Any] = {"body": block}
    if hasattr(stmt, "orelse"):
        changes["orelse"] = None
    return stmt.with_changes(**changes)


class _Placer:
    def __init__(self, module: cst.Module, text: str, work_lines: Sequence[int]):
        self.module = module
        self.text = text
        self.work_lines = work_lines
        self.line_starts = [0] + [m.end() for m in _NEWLINE.finditer(text)]
        self.ranges: dict[cst.CSTNode, CodeRange] = {}
        self.skipped: set[int] = set()
        self.cuts: dict[int, tuple[cst.CSTNode, str, str]] = {}
        self.provider = SimpleNamespace(_computed=self.ranges)  # what the codegen state records into

    def _has_work(self, first: int, last: int) -> bool:
        at = bisect.bisect_left(self.work_lines, first)
        return at < len(self.work_lines) and self.work_lines[at] <= last

    def _render(self, node: cst.CSTNode, line: int, indent: list[str], header: bool = False, **kwargs: Any) -> None:
        state = PositionProvidingCodegenState(
            default_indent=self.module.default_indent, default_newline=self.module.default_newline,
            provider=self.provider,  # type: ignore[arg-type]  # it only writes `_computed`
        )
        state.line = line
        state.indent_tokens = list(indent)
        node._codegen(state, **kwargs)
        rendered = "".join(state.tokens)
        if header:  # up to the end of the header line(s); the marker is not source
            rendered = rendered[: rendered.rindex("\n", 0, rendered.index(_END)) + 1]
            block = node.body  # type: ignore[attr-defined]
            for made_here in (node, block, *_subtree(block.body[0])):  # the copy's own nodes are not in the tree
                self.ranges.pop(made_here, None)
        if not 1 <= line <= len(self.line_starts):
            raise _Misplaced
        offset = self.line_starts[line - 1]
        if self.text[offset:offset + len(rendered)] == rendered:
            return
        at_end = rendered.removesuffix(self.module.default_newline)  # libcst drops it at a file's end
        if self.module.has_trailing_newline or self.text[offset:] != at_end:
            raise _Misplaced

    def block(self, stmts: Sequence[cst.BaseStatement], nodes: Sequence[ast.stmt], indent: list[str]) -> None:
        paired = _pair(stmts, nodes)
        starts = [first - _lines_before_first_token(stmt) for stmt, _, first, _ in paired]
        for at, (stmt, node, first, last) in enumerate(paired):
            if not self._has_work(first, last):
                self.skipped.add(id(stmt))
                # nested, more than a line (a one-line statement renders as fast as it is stood in for), and
                # where it ends is known: the next one's start
                if indent and at + 1 < len(paired) and (last > first or not isinstance(stmt, cst.SimpleStatementLine)):
                    self._cut(stmt, (starts[at], first, last, starts[at + 1]), indent)
            elif isinstance(stmt, cst.SimpleStatementLine) or last - first < SMALL_STATEMENT_LINES:
                self._render(stmt, first - _lines_before_first_token(stmt), indent)
            else:
                self.compound(stmt, node, first, indent)

    def _cut(self, stmt: cst.BaseStatement, lines: tuple[int, int, int, int], indent: list[str]) -> None:
        """Keep the source text of a statement without work, from its `start` line to `end` (the next
        statement's start, excluded), when the lines before its `first` token are blank or comments."""
        start, first, last, end = lines
        starts = self.line_starts
        if not start <= first <= last < end <= len(starts) - 1 or any(
                self.text[starts[n]:starts[n + 1]].strip()[:1] not in ("", "#") for n in range(start - 1, first - 1)):
            return
        self.cuts[id(stmt)] = (stmt, self.text[starts[start - 1]:starts[end - 1]], "".join(indent))

    def _inner(self, block: cst.BaseSuite, indent: list[str]) -> list[str]:
        assert isinstance(block, cst.IndentedBlock)
        return [*indent, self.module.default_indent if block.indent is None else block.indent]

    def compound(self, stmt: cst.BaseStatement, node: ast.stmt, first: int, indent: list[str], **kwargs: Any) -> None:
        body = getattr(stmt, "body", None)
        if not _blocks_only(stmt) or not isinstance(body, cst.IndentedBlock):
            self._render(stmt, first - _lines_before_first_token(stmt), indent, **kwargs)  # one-line body, match, ...
            return
        if not isinstance(stmt, cst.Try):  # `try:` has nothing to find in its header
            self._render(_header_only(stmt), first - _lines_before_first_token(stmt), indent, header=True, **kwargs)
        self.block(body.body, node.body, self._inner(body, indent))  # type: ignore[attr-defined]
        if isinstance(stmt, cst.Try):
            assert isinstance(node, ast.Try)
            if len(stmt.handlers) != len(node.handlers):
                raise _Misplaced
            for handler, ast_handler in zip(stmt.handlers, node.handlers):
                handler_body = handler.body
                assert isinstance(handler_body, cst.IndentedBlock)
                if not self._has_work(ast_handler.lineno, ast_handler.end_lineno or ast_handler.lineno):
                    self.skipped.update(id(inner) for inner in handler_body.body)
                    continue
                self._render(_header_only(handler), ast_handler.lineno - len(handler.leading_lines), indent, header=True)
                self.block(handler_body.body, ast_handler.body, self._inner(handler_body, indent))
            if stmt.finalbody is not None:
                self._else(stmt.finalbody.body, node.finalbody, indent)
        orelse = getattr(stmt, "orelse", None)
        ast_orelse: list[ast.stmt] = getattr(node, "orelse", [])
        if isinstance(orelse, cst.If):  # elif
            if len(ast_orelse) != 1 or not isinstance(ast_orelse[0], ast.If):
                raise _Misplaced
            elif_node = ast_orelse[0]
            if self._has_work(elif_node.lineno, elif_node.end_lineno or elif_node.lineno):
                self.compound(orelse, elif_node, elif_node.lineno, indent, is_elif=True)
            else:
                self.skipped.add(id(orelse))
        elif isinstance(orelse, cst.Else):
            self._else(orelse.body, ast_orelse, indent)

    def _else(self, body: cst.BaseSuite, nodes: Sequence[ast.stmt], indent: list[str]) -> None:
        assert isinstance(body, cst.IndentedBlock)
        self.block(body.body, nodes, self._inner(body, indent))


def _subtree(node: cst.CSTNode) -> list[cst.CSTNode]:
    nodes: list[cst.CSTNode] = []

    class _Collect(cst.CSTVisitor):
        def on_visit(self, visited: cst.CSTNode) -> bool:
            nodes.append(visited)
            return True

    node.visit(_Collect())
    return nodes


_SPLITTABLE = (cst.FunctionDef, cst.ClassDef, cst.With, cst.For, cst.While, cst.If, cst.Try)


def _blocks_only(stmt: cst.BaseStatement) -> bool:
    """Whether `stmt` is split into header and blocks here: every block of it, down its elif chain,
    is indented (a one-line `else: x` has no statement of its own to place)."""
    if not isinstance(stmt, _SPLITTABLE):
        return False
    suites: list[Any] = [stmt.body]
    if isinstance(stmt, cst.Try):
        suites += [h.body for h in stmt.handlers] + ([stmt.finalbody.body] if stmt.finalbody else [])
    orelse = getattr(stmt, "orelse", None)
    if isinstance(orelse, cst.Else):
        suites.append(orelse.body)
    elif isinstance(orelse, cst.If) and not _blocks_only(orelse):
        return False
    return all(isinstance(suite, cst.IndentedBlock) for suite in suites)


def node_positions(module: cst.Module, tree: ast.Module, text: str, work_lines: Sequence[int]) -> NodePositions:
    """Positions of the nodes in the statements that hold one of `work_lines` (sorted); the ids
    of statements without any in `skipped`."""
    placer = _Placer(module, text, work_lines)
    try:
        placer.block(module.body, tree.body, [])
    except _Misplaced:
        return full_positions(module)
    return NodePositions(placer.ranges, placer.skipped, cuts=placer.cuts)


def source_texts(module: cst.Module, tree: ast.Module, text: str) -> dict[int, tuple[cst.CSTNode, str]]:
    """id -> (statement, its text) for each top-level statement, cut from `text` (the module's source): a
    statement's text runs from its leading lines to the next one's (libcst renders a module as its header,
    its statements and its footer, each whole lines). Empty where the cut cannot be checked: then every
    statement is rendered."""
    if not module.has_trailing_newline or not module.body:
        return {}
    try:
        paired = _pair(module.body, tree.body)
    except _Misplaced:
        return {}
    line_starts = [0] + [m.end() for m in _NEWLINE.finditer(text)]
    if line_starts[-1] != len(text):
        return {}
    lines = len(line_starts) - 1
    starts = [first - _lines_before_first_token(stmt) for stmt, _, first, _ in paired]
    ends = [*starts[1:], lines - len(module.footer) + 1]
    if starts[0] != len(module.header) + 1:
        return {}
    cut: dict[int, tuple[cst.CSTNode, str]] = {}
    for (stmt, _, first, last), start, end in zip(paired, starts, ends):
        if not start <= first <= last < end or text[line_starts[first - 1]] in " \t\r\n" or any(
                text[line_starts[n]:line_starts[n + 1]].strip()[:1] not in ("", "#") for n in range(start - 1, first - 1)):
            return {}  # not where libcst would have it: render instead
        cut[id(stmt)] = (stmt, text[line_starts[start - 1]:line_starts[end - 1]])
    return cut
