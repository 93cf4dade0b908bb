"""Source positions of libcst nodes, computed only for the top-level statements a fix may touch.

libcst's `PositionProvider` renders the whole module once with position tracking; on megatron-core
that was the largest single cost of `migrate fix` (a 2 000-line module with one `.cuda()` paid for
every token). Here each top-level statement that holds a line of work is rendered on its own,
starting at the line where `ast` says it stands; the rendered text must equal the source at that
line, or the whole module falls back to libcst's full map. Statements without work are listed as
skippable instead: the fixer does not walk into them.
"""

from __future__ import annotations

import ast
import bisect
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import cast

import libcst as cst
from libcst._position import CodePosition
from libcst.metadata import CodeRange, MetadataWrapper, PositionProvider
from libcst.metadata.position_provider import PositionProvidingCodegenState

_NEWLINE = re.compile(r"\r\n?|\n")


@dataclass
class NodePositions:
    ranges: Mapping[cst.CSTNode, CodeRange]
    skipped: set[int] = field(default_factory=set)  # ids of top-level statements with no work inside
    complete: bool = False  # libcst's full map (every node)


def full_positions(module: cst.Module) -> NodePositions:
    """libcst's map for every node. Generating the one provider directly skips the extra walk
    `MetadataWrapper.resolve` makes for its (here empty) batch of batchable providers."""
    wrapper = MetadataWrapper(module, unsafe_skip_copy=True)
    try:
        return NodePositions(cast(Mapping[cst.CSTNode, CodeRange], PositionProvider()._gen(wrapper)), complete=True)
    except (AttributeError, TypeError):  # a libcst without that internal: the public way
        return NodePositions(wrapper.resolve(PositionProvider), complete=True)


def _first_lines(module: cst.Module, tree: ast.Module) -> list[tuple[int, int]] | None:
    """(first syntactic line, last line) of each top-level libcst statement, from `ast`; None when
    the two trees do not pair up (then the caller uses the full map)."""
    spans: list[tuple[int, int]] = []
    at = 0
    for stmt in module.body:
        count = len(stmt.body) if isinstance(stmt, cst.SimpleStatementLine) else 1
        nodes = tree.body[at:at + count]
        if len(nodes) != count:
            return None
        at += count
        first = nodes[0]
        decorators = getattr(first, "decorator_list", None)
        start = decorators[0].lineno if decorators else first.lineno
        spans.append((start, max(n.end_lineno or n.lineno for n in nodes)))
    return spans if at == len(tree.body) else None


def _lines_before_first_token(stmt: cst.BaseStatement) -> int:
    count = len(getattr(stmt, "leading_lines", ()))  # every statement class has them; the base does not say
    decorators: Sequence[cst.Decorator] = getattr(stmt, "decorators", ())
    if decorators:
        count += len(decorators[0].leading_lines)
    return count


def node_positions(module: cst.Module, tree: ast.Module, text: str, work_lines: Sequence[int]) -> NodePositions:
    """Positions of the nodes in the top-level statements that hold one of `work_lines` (sorted);
    the ids of the other top-level statements in `skipped`."""
    spans = _first_lines(module, tree)
    if spans is None:
        return full_positions(module)
    line_starts = [0] + [m.end() for m in _NEWLINE.finditer(text)]
    ranges: dict[cst.CSTNode, CodeRange] = {}
    skipped: set[int] = set()

    provider = SimpleNamespace(_computed=ranges)  # what the codegen state records into
    previous_last = 0
    for stmt, (first, last) in zip(module.body, spans):
        earliest, previous_last = previous_last + 1, last
        at = bisect.bisect_left(work_lines, first)
        if at == len(work_lines) or work_lines[at] > last:
            skipped.add(id(stmt))
            continue
        state = PositionProvidingCodegenState(
            default_indent=module.default_indent, default_newline=module.default_newline,
            provider=provider,  # type: ignore[arg-type]  # it only writes `_computed`
        )
        state.line = start = first - _lines_before_first_token(stmt)
        stmt._codegen(state)
        rendered = "".join(state.tokens)
        if stmt is module.body[-1] and not module.has_trailing_newline:
            rendered = rendered.removesuffix(module.default_newline)  # libcst drops it at the module's end
        shift = _shift_to_source(text, line_starts, rendered, start, earliest)
        if shift is None:
            return full_positions(module)  # the statement is not where ast put it: trust libcst alone
        if shift:
            _shift(ranges, stmt, shift)
    return NodePositions(ranges, skipped)


def _shift_to_source(text: str, line_starts: list[int], rendered: str, line: int, earliest: int) -> int | None:
    """Lines to move the rendering by so that it stands where the source has it (0 almost always; an
    opening parenthesis on a line of its own puts ast's line after libcst's), or None."""
    for candidate in range(line, max(earliest, 1) - 1, -1):
        if candidate > len(line_starts):
            continue
        offset = line_starts[candidate - 1]
        if text[offset:offset + len(rendered)] == rendered:
            return candidate - line
    return None


def _shift(ranges: dict[cst.CSTNode, CodeRange], stmt: cst.CSTNode, lines: int) -> None:
    class _Nodes(cst.CSTVisitor):
        def on_visit(self, node: cst.CSTNode) -> bool:
            where = ranges.get(node)
            if where is not None:
                ranges[node] = CodeRange(
                    CodePosition(where.start.line + lines, where.start.column),
                    CodePosition(where.end.line + lines, where.end.column),
                )
            return True

    stmt.visit(_Nodes())
