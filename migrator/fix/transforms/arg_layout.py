"""Keeping the author's comments and line structure when a call's argument list is rebuilt.

libcst hangs the text after an argument (a comment, the newline before the next one, the indent
before `)`) on that argument's comma or `whitespace_after_arg`; dropping or moving arguments drops
that text with them unless it is carried over."""

from __future__ import annotations

from collections.abc import Sequence

import libcst as cst

Whitespace = cst.BaseParenthesizableWhitespace


def closing(call: cst.Call) -> tuple[cst.Comma | None, Whitespace]:
    """The call's trailing comma (None without one) and the whitespace before its `)`."""
    last = call.args[-1]
    if isinstance(last.comma, cst.Comma):
        return last.comma, last.comma.whitespace_after
    return None, last.whitespace_after_arg


def as_last(arg: cst.Arg, call: cst.Call) -> cst.Arg:
    """`arg` as the new last argument: the call's own ending (trailing comma, newline and indent
    before `)`) plus whatever comment followed `arg`'s own comma."""
    old_last = call.args[-1]
    if arg is old_last:
        return arg
    trailing, close = closing(call)
    own = arg.comma.whitespace_after if isinstance(arg.comma, cst.Comma) and arg.comma is not old_last.comma else None
    ws = close if own is None else merge(own, close)
    if trailing is not None:
        before = arg.comma.whitespace_before if isinstance(arg.comma, cst.Comma) else trailing.whitespace_before
        return arg.with_changes(comma=trailing.with_changes(whitespace_before=before, whitespace_after=ws))
    return arg.with_changes(comma=cst.MaybeSentinel.DEFAULT, whitespace_after_arg=ws)


def merge(own: Whitespace, close: Whitespace) -> Whitespace:
    """`own`'s comment and line break, ending on `close`'s indent; a comment in `close` is kept as
    a line of its own."""
    if not isinstance(own, cst.ParenthesizedWhitespace):
        return close
    if not isinstance(close, cst.ParenthesizedWhitespace):
        return own if _has_comment(own) else close
    lines = list(own.empty_lines)
    if close.first_line.comment is not None:
        lines.append(cst.EmptyLine(indent=own.indent, whitespace=own.last_line, comment=close.first_line.comment))
    lines.extend(close.empty_lines)
    return close.with_changes(first_line=own.first_line, empty_lines=lines)


def keep_comments(old: cst.Call, new: cst.Call) -> cst.Call:
    """`new` with every comment of `old`'s arguments that it lost (those of dropped arguments) put
    on lines of their own before the `)`."""
    lost = _comments(old.args)
    for text in _comments(new.args):
        if text in lost:
            lost.remove(text)
    if not lost or not new.args:
        return new
    last = new.args[-1]
    ws = last.comma.whitespace_after if isinstance(last.comma, cst.Comma) else last.whitespace_after_arg
    indent = _arg_indent(old, ws)
    lines = [cst.EmptyLine(indent=True, whitespace=indent, comment=cst.Comment(text)) for text in lost]
    if isinstance(ws, cst.ParenthesizedWhitespace):  # after the old last argument's, which `as_last` moved: in order
        ws = ws.with_changes(empty_lines=_in_source_order([*ws.empty_lines, *lines], _comments(old.args)))
    else:
        ws = cst.ParenthesizedWhitespace(empty_lines=lines, indent=True, last_line=cst.SimpleWhitespace(""))
    if isinstance(last.comma, cst.Comma):
        last = last.with_changes(comma=last.comma.with_changes(whitespace_after=ws))
    else:
        last = last.with_changes(whitespace_after_arg=ws)
    return new.with_changes(args=[*new.args[:-1], last])


def _in_source_order(lines: list[cst.EmptyLine], order: list[str]) -> list[cst.EmptyLine]:
    """The comment lines of `lines` sorted as their texts come in `order`, the blank lines where they were."""
    rank: dict[str, int] = {}
    for at, text in enumerate(order):
        rank.setdefault(text, at)
    commented = iter(sorted((line for line in lines if line.comment is not None),
                            key=lambda line: rank.get(line.comment.value if line.comment else "", len(order))))
    return [next(commented) if line.comment is not None else line for line in lines]


def _arg_indent(call: cst.Call, fallback: Whitespace) -> cst.SimpleWhitespace:
    for ws in (call.whitespace_before_args, fallback):
        if isinstance(ws, cst.ParenthesizedWhitespace):
            return ws.last_line
    return cst.SimpleWhitespace("")


def _has_comment(ws: cst.ParenthesizedWhitespace) -> bool:
    return ws.first_line.comment is not None or any(line.comment is not None for line in ws.empty_lines)


def _comments(args: Sequence[cst.Arg]) -> list[str]:
    found: list[str] = []

    class _Collect(cst.CSTVisitor):
        def visit_Comment(self, node: cst.Comment) -> None:
            found.append(node.value)

    for arg in args:
        arg.visit(_Collect())
    return found
