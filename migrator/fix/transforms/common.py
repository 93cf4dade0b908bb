"""libcst building blocks the rule units' `fix` functions share (migrator/rules/<family>/<rule>.py)."""

from __future__ import annotations

import libcst as cst

from migrator.fix.context import FixContext
from migrator.fix.imports import dotted_name
from migrator.fix.transforms.helpers import ACCELERATOR_TYPE_HELPER, DEVICE_HELPER
from migrator.ground.kinds import Target


def device(ctx: FixContext, index: cst.BaseExpression | None = None) -> cst.Call:
    """`_migrate_device(index)`: this host's accelerator (or the CPU), emitted once per file."""
    ctx.helper("_migrate_device", DEVICE_HELPER)
    args = [cst.Arg(index)] if index is not None else []
    return cst.Call(func=cst.Name("_migrate_device"), args=args)


def device_type(ctx: FixContext) -> cst.Attribute:
    return cst.Attribute(value=device(ctx), attr=cst.Name("type"))


def accelerator_type(ctx: FixContext) -> cst.Call:
    """`_migrate_accelerator_type()`: what a device-type comparison with "cuda" compares with on portable
    (None on a CPU-only host, so a CPU tensor never looks like an accelerator's)."""
    ctx.helper("_migrate_accelerator_type", ACCELERATOR_TYPE_HELPER)
    return cst.Call(func=cst.Name("_migrate_accelerator_type"))


def device_arg(ctx: FixContext) -> cst.BaseExpression:
    """The device-type argument: "npu", or the portable host's accelerator type."""
    return cst.SimpleString('"npu"') if ctx.target == Target.NPU else device_type(ctx)


def string_token_rename(node: cst.CSTNode, old: str, new: str) -> cst.BaseExpression | None:
    """`old` replaced by `new` inside a string literal (plain, implicitly concatenated or f-string)."""
    if isinstance(node, cst.SimpleString):
        if old not in node.value:
            return None
        return node.with_changes(value=node.value.replace(old, new))
    if isinstance(node, cst.ConcatenatedString):
        left = string_token_rename(node.left, old, new) or node.left
        right = string_token_rename(node.right, old, new) or node.right
        return node.with_changes(left=left, right=right)
    if isinstance(node, cst.FormattedString):
        parts = [
            p.with_changes(value=p.value.replace(old, new)) if isinstance(p, cst.FormattedStringText) else p
            for p in node.parts
        ]
        return node.with_changes(parts=parts)
    return None


def _parenthesised(expr: cst.BaseExpression, like: cst.BaseExpression) -> cst.BaseExpression:
    return expr.with_changes(lpar=like.lpar, rpar=like.rpar)


def replace_dotted(node: cst.BaseExpression, new: str) -> cst.BaseExpression:
    """`node` (a Name/Attribute chain) spelling `new`, changing only the parts that differ: the dots'
    whitespace, line breaks, comments and parentheses of the user's code stay where they were."""
    old = dotted_name(node)
    if old == new:
        return node
    head, _, last = new.rpartition(".")
    if isinstance(node, cst.Attribute):
        if not head:
            return _parenthesised(cst.Name(new), node)
        attr = node.attr if node.attr.value == last else node.attr.with_changes(value=last)
        return node.with_changes(value=replace_dotted(node.value, head), attr=attr)
    if isinstance(node, cst.Name):
        if not head:
            return node.with_changes(value=new)
        return _parenthesised(cst.parse_expression(new), node)
    raise ValueError("not a dotted name")


def replace_dotted_prefix(node: cst.BaseExpression, parts: int, expression: str) -> cst.BaseExpression:
    """The first `parts` parts of a dotted chain replaced by `expression` (the rest left as it is)."""
    if dotted_name(node).count(".") + 1 == parts:
        return _parenthesised(cst.parse_expression(expression), node)
    if not isinstance(node, cst.Attribute):
        raise ValueError("shorter than the prefix")
    return node.with_changes(value=replace_dotted_prefix(node.value, parts, expression))
