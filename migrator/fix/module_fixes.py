"""Rules whose fix rewrites more than the finding's node (`LEVEL = "module"`: Triton kernels and their
launches, statements deleted): each unit's `fix_module(ctx, module, tree, finding)` gets the whole libcst
module and the original `ast` tree, and finds what it rewrites by name, not by position.

Findings of one rule with the same symbol (one per kernel in the scan) are fixed once: the fix covers
every use in the module. A unit declines with the reason the scan gives (both ask the same functions
over the same `ast` tree), and the precheck runs first on the parser-neutral site, as for other rules.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable

import libcst as cst

from migrator.catalogue import units
from migrator.catalogue.loader import Rule
from migrator.catalogue.site import CallSite, Declined
from migrator.engine.sites import qualnames_from
from migrator.fix.context import FixContext
from migrator.ground.model import Finding

MODULE_LEVEL = "module"


def is_module_level(rule: Rule) -> bool:
    return rule.fix == "unit" and units.level(rule) == MODULE_LEVEL


def split(findings: list[Finding], rules: dict[str, Rule]) -> tuple[list[Finding], list[Finding]]:
    """(findings fixed node by node in the walk, findings fixed over the whole module after it)."""
    whole = [f for f in findings if is_module_level(rules[f.code])]
    return [f for f in findings if not is_module_level(rules[f.code])], whole


qualnames = qualnames_from  # the scanner's `Names` over the fixer's aliases


def dotted_of(node: cst.BaseExpression) -> str | None:
    if isinstance(node, cst.Name):
        return node.value
    if isinstance(node, cst.Attribute):
        inner = dotted_of(node.value)
        return f"{inner}.{node.attr.value}" if inner else None
    return None


def resolve(ctx: FixContext, node: cst.BaseExpression) -> set[str]:
    """The qualified names a libcst name or attribute chain spells through the module's imports."""
    text = dotted_of(node)
    if text is None:
        return set()
    root, _, rest = text.partition(".")
    return {f"{base}.{rest}" if rest else base for base in ctx.aliases.get(root, ())}


def apply_module_fixes(ctx: FixContext, module: cst.Module, tree: ast.Module, findings: Iterable[Finding],
                       rules: dict[str, Rule]) -> cst.Module:
    groups: dict[tuple[str, str], list[Finding]] = {}
    for f in findings:
        groups.setdefault((f.code, f.symbol), []).append(f)
    for (code, symbol), group in groups.items():
        rule = rules[code]
        verdict = units.precheck(rule, CallSite(code, symbol, ctx.target))
        result: cst.Module | Declined = verdict if isinstance(verdict, Declined) else Declined("")
        if not isinstance(verdict, Declined):
            mark = ctx.checkpoint()
            result = units.unit(rule).fix_module(ctx, module, tree, group[0])  # type: ignore[union-attr]
            if isinstance(result, Declined):
                ctx.undo_since(mark, result.reason)
        for f in group:
            if isinstance(result, Declined):
                ctx.decline(f, result.reason)
            else:
                ctx.applied.append(f)
        if isinstance(result, cst.Module):
            module = result
    return module


def with_trailing(items: list, new, comma_cls=cst.Comma):  # type: ignore[no-untyped-def]
    """`items` (call arguments or parameters) with `new` appended, commas kept as the user wrote them: after a
    last item that ends its line the new one gets a line of its own."""
    if not items:
        return [new]
    last = items[-1]
    comma = last.comma
    if isinstance(comma, cst.Comma) and isinstance(comma.whitespace_after, cst.ParenthesizedWhitespace):
        line_break = cst.ParenthesizedWhitespace(
            first_line=cst.TrailingWhitespace(), indent=True, last_line=comma.whitespace_after.last_line)
        return [*items, new.with_changes(comma=comma_cls(whitespace_after=line_break))]
    if not isinstance(comma, cst.Comma):
        last = last.with_changes(comma=comma_cls(whitespace_after=cst.SimpleWhitespace(" ")))
    return [*items[:-1], last, new]
