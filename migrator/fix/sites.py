"""The fixer's side of "one decision": the `CallSite` of a finding, built from the libcst tree, for the
rule's `precheck` (the scanner builds the same record from `ast`, migrator/engine/sites.py)."""

from __future__ import annotations

import libcst as cst

from migrator.catalogue.site import NOT_LITERAL, Arg, CallSite, callee_name, is_build_file, literal_of, string_shape
from migrator.fix.context import FixContext
from migrator.fix.imports import dotted_name, symbol_replacement
from migrator.ground.model import Finding


def text(node: cst.CSTNode) -> str:
    """The node's source without its own parentheses (ast ranges leave them out too)."""
    if getattr(node, "lpar", None) or getattr(node, "rpar", None):
        node = node.with_changes(lpar=[], rpar=[])
    return cst.Module(body=[]).code_for_node(node)


def _pieces(node: cst.CSTNode) -> tuple[tuple[str, str], ...]:
    if not isinstance(node, cst.FormattedString):
        return ()
    return tuple(
        ("text", p.value) if isinstance(p, cst.FormattedStringText)
        else ("expr", "plain" if isinstance(p, cst.FormattedStringExpression) and p.conversion is None
              and p.format_spec is None else "formatted")
        for p in node.parts
    )


def _args(call: cst.Call) -> tuple[Arg, ...]:
    out = []
    for a in call.args:
        value = text(a.value)
        out.append(Arg(a.keyword.value if a.keyword else None, literal_of(value) if not a.star else NOT_LITERAL, value,
                       a.star if isinstance(a.star, str) else ""))
    return tuple(out)


def build_site(ctx: FixContext, finding: Finding, node: cst.CSTNode, call: cst.Call | None, is_import: bool = False,
               in_pattern: bool = False, default_of_choices: bool = False, guards: str = "",
               passed_in: cst.Call | None = None, assigned: bool = False) -> CallSite:
    """`passed_in`: the call whose first positional argument the (uncalled) node is."""
    source = text(node)
    string = string_shape(source) if isinstance(node, (cst.SimpleString, cst.ConcatenatedString, cst.FormattedString)) else ""
    try:
        root = tuple(dotted_name(node).split("."))  # type: ignore[arg-type]
    except ValueError:
        root = ()
    operands: tuple[str, ...] = ()
    if isinstance(node, cst.Comparison):
        operands = (text(node.left), *(text(c.comparator) for c in node.comparisons))
    return CallSite(
        code=finding.code, symbol=finding.symbol, target=ctx.target, text=source, string=string,
        pieces=_pieces(node), called=call is not None, args=_args(call) if call is not None else (),
        replacement=symbol_replacement(finding) if finding.symbol else None, is_import=is_import, root=root,
        root_names=frozenset(ctx.aliases.get(root[0], ())) if root else frozenset(), operands=operands,
        in_pattern=in_pattern, build_file=is_build_file(finding.path), default_of_choices=default_of_choices, guards=guards,
        passed_to=callee_name(_dotted_parts(passed_in.func), ctx.aliases) if passed_in is not None else "",
        passed_args=_args(passed_in) if passed_in is not None else (), assigned=assigned,
    )


def _dotted_parts(node: cst.BaseExpression) -> tuple[str, ...]:
    try:
        return tuple(dotted_name(node).split("."))
    except ValueError:
        return ()
