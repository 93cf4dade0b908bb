"""A module whose every site the scan already declined has nothing to fix: its declines, without libcst.

The fixer asks each site's precheck again on the libcst node (`python_fixer._Fixer._apply`), the same
question the scan asked on the `ast` node, and declines it with the same reason; with no site left to
rewrite the text stays as it is. Parsing such a module with libcst only to decline every site again is
most of its cost, so this answers for it, in the order the fixer's walk would: source order, which is
the walk's as long as no two sites share a statement (a call's callee is judged when the whole call is
left, after its arguments). Anything else (a site on an import line or of a module-level rule, judged
after the walk; two sites in one statement) goes to the fixer.
"""

from __future__ import annotations

import ast
from collections.abc import Sequence

from migrator.catalogue import units
from migrator.catalogue.loader import Rule
from migrator.fix.module_fixes import is_module_level
from migrator.ground.model import Finding


def _statement_of(body: Sequence[ast.stmt], line: int) -> ast.stmt | None:
    """The innermost statement holding `line` (a compound statement when `line` is in its header:
    decorators, `with` items, `if` tests)."""
    for node in body:
        first = min([node.lineno, *(d.lineno for d in getattr(node, "decorator_list", ()))])
        if first <= line <= (node.end_lineno or node.lineno):
            for block in _blocks(node):
                inner = _statement_of(block, line)
                if inner is not None:
                    return inner
            return node
    return None


def _blocks(node: ast.stmt) -> list[list[ast.stmt]]:
    blocks = [getattr(node, name) for name in ("body", "orelse", "finalbody")
              if isinstance(getattr(node, name, None), list)]
    return blocks + [inner.body for inner in (*getattr(node, "handlers", ()), *getattr(node, "cases", ()))]


def declined_as_scanned(tree: ast.Module, findings: Sequence[Finding],
                        rules: dict[str, Rule]) -> list[tuple[Finding, str]] | None:
    """Each finding with the reason the fixer would decline it for, in the fixer's order; None when the
    fixer must be asked (a site it may rewrite, or an order this cannot tell)."""
    statements: set[int] = set()
    declined: list[tuple[Finding, str]] = []
    for f in findings:
        if f.fix is not None or f.declined is None:
            return None
        statement = _statement_of(tree.body, f.line)
        if (statement is None or isinstance(statement, (ast.Import, ast.ImportFrom)) or id(statement) in statements
                or _statement_of(tree.body, f.end_line) is not statement):
            return None
        statements.add(id(statement))
        rule = rules[f.code]
        if getattr(units.unit(rule), "fix", None) is None or is_module_level(rule):
            return None  # no fix (the fixer says so, not the scan's reason), or one over the whole module
        declined.append((f, f.declined))
    if [Finding.sort_key(f) for f in findings] != sorted(Finding.sort_key(f) for f in findings):
        return None
    return declined
