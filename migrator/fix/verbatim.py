"""Render a rewritten statement without rendering again what it holds unchanged.

A fix rewrites a few nodes of a statement; libcst would render the whole of it (a 2,000-line class for
one `.cuda()`). The nested statements the fixer never walked into are the very objects of the parsed
tree, and their source text is known (`positions.NodePositions.cuts`): each stands in the rendering as
that text, at the indentation it was cut at, else (moved into another block) it is rendered as usual.
"""

from __future__ import annotations

from typing import Any, TypeVar

import libcst as cst

Cuts = dict[int, tuple[cst.CSTNode, str, str]]
Stmt = TypeVar("Stmt", bound=cst.CSTNode)


class _SourceText(cst.SimpleStatementLine):
    """A statement emitted as its source text: its leading lines, indentation and final newline."""

    def _codegen(self, state: Any, **kwargs: Any) -> None:
        original, text, indent = self.__dict__["cut"]
        if "".join(state.indent_tokens) == indent:
            state.add_token(text)
        else:  # not where it was cut: its text would be indented wrongly
            original._codegen(state, **kwargs)


def _stand_in(cut: tuple[cst.CSTNode, str, str]) -> cst.BaseStatement:
    node = _SourceText(body=[cst.Pass()])
    node.__dict__["cut"] = cut  # libcst nodes are frozen; the stand-in lives for one rendering
    return node


def _suite(block: cst.BaseSuite, cuts: Cuts) -> cst.BaseSuite:
    if not isinstance(block, cst.IndentedBlock):
        return block
    body = []
    for stmt in block.body:
        cut = cuts.get(id(stmt))
        body.append(_stand_in(cut) if cut is not None and cut[0] is stmt else with_source_text(stmt, cuts))
    if all(new is old for new, old in zip(body, block.body)):
        return block
    return block.with_changes(body=body)


def _with_body(node: Any, cuts: Cuts) -> Any:
    """`node` (an else, except or finally part) with its block's unchanged statements as source text."""
    body = _suite(node.body, cuts)
    return node if body is node.body else node.with_changes(body=body)


def with_source_text(stmt: Stmt, cuts: Cuts) -> Stmt:
    """`stmt` with each unchanged nested statement in `cuts` standing as its source text."""
    changes: dict[str, Any] = {}
    body = getattr(stmt, "body", None)
    if isinstance(body, cst.BaseSuite):
        changes["body"] = _suite(body, cuts)
    orelse = getattr(stmt, "orelse", None)
    if isinstance(orelse, cst.Else):
        changes["orelse"] = _with_body(orelse, cuts)
    elif isinstance(orelse, cst.If):
        changes["orelse"] = with_source_text(orelse, cuts)
    if isinstance(stmt, cst.Try):
        handlers = [_with_body(h, cuts) for h in stmt.handlers]
        if any(new is not old for new, old in zip(handlers, stmt.handlers)):
            changes["handlers"] = handlers
        if stmt.finalbody is not None:
            changes["finalbody"] = _with_body(stmt.finalbody, cuts)
    if all(getattr(stmt, name) is value for name, value in changes.items()):
        return stmt
    return stmt.with_changes(**changes)
