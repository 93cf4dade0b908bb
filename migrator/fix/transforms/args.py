"""Matching call arguments to a signature, and building calls, for libcst transforms."""

from __future__ import annotations

from typing import Any

import libcst as cst

from migrator.catalogue.site import bind_places, literal_of


def bind(call: cst.Call, params: list[str]) -> dict[str, cst.Arg] | None:
    """Map each argument to its parameter name; None for *args/**kwargs or unknown keywords."""
    shape = [(arg.keyword.value if arg.keyword else None, bool(arg.star)) for arg in call.args]
    places = bind_places(shape, params)
    return None if places is None else {name: call.args[i] for name, i in places.items()}


def code(node: cst.CSTNode) -> str:
    return cst.Module(body=[]).code_for_node(node)


def literal(arg: cst.Arg | None) -> Any:  # any literal's value, or NOT_LITERAL
    """The Python value of a simple literal argument, or NOT_LITERAL when it is not a literal."""
    if arg is None:
        return None
    return literal_of(code(arg.value))


def kwarg(name: str, value: cst.BaseExpression | str, last: bool = False) -> cst.Arg:
    if isinstance(value, str):
        value = cst.parse_expression(value)
    return cst.Arg(
        keyword=cst.Name(name),
        value=value,
        equal=cst.AssignEqual(whitespace_before=cst.SimpleWhitespace(""), whitespace_after=cst.SimpleWhitespace("")),
    )


def with_args(call: cst.Call, func: cst.BaseExpression, args: list[cst.Arg]) -> cst.Call:
    """Replace callee and arguments, keeping the call's layout and comments: original arguments keep
    their commas, new ones follow the call's separator (one per line in a multi-line call), the last
    one takes the call's ending (trailing comma, line break before `)`), and the comments of dropped
    arguments stay (`arg_layout`)."""
    from migrator.fix.transforms import arg_layout

    if not call.args or not args:
        return call.with_changes(func=func, args=args)
    separator: cst.BaseParenthesizableWhitespace = cst.SimpleWhitespace(" ")
    for a in call.args[:-1]:
        if isinstance(a.comma, cst.Comma):
            separator = a.comma.whitespace_after
            break
    old_last = call.args[-1]
    fixed = []
    for a in args[:-1]:
        carried = isinstance(a.comma, cst.Comma) and a.comma is not old_last.comma
        fixed.append(a if carried else a.with_changes(comma=cst.Comma(whitespace_after=separator)))
    fixed.append(arg_layout.as_last(args[-1], call))
    return arg_layout.keep_comments(call, call.with_changes(func=func, args=fixed))


def as_keyword(arg: cst.Arg, name: str) -> cst.Arg:
    """`arg` passed as `name=`, keeping its comma (and the comment after it)."""
    if arg.keyword is not None and arg.keyword.value == name:
        return arg
    return kwarg(name, arg.value).with_changes(comma=arg.comma, whitespace_after_arg=arg.whitespace_after_arg)


def keep_or_kwarg(args: dict[str, cst.Arg], name: str, default: str | None = None) -> cst.Arg | None:
    """The user's own argument when it already is `name=...`, else a new keyword argument."""
    if name in args:
        arg = args[name]
        return as_keyword(arg, name)
    return kwarg(name, default) if default is not None else None


def positional(value: cst.BaseExpression | str) -> cst.Arg:
    if isinstance(value, str):
        value = cst.parse_expression(value)
    return cst.Arg(value=value)
