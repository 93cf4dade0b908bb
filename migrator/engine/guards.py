"""Availability checks that guard a CUDA-only call (issue 39 item 2c).

`self.cuda = torch.cuda.is_available()` renamed to the NPU check is True on an Ascend host, so a
`if self.cuda and torch.cuda.get_device_capability(0)[0] < 7:` that stays manual becomes reachable
there and raises, where the original never reached it. The availability rewrite is declined while
the check (its own test, or the flag it is assigned to) guards such a call.

One function over the `ast` tree and the file's findings as (line, symbol): the scan passes its hits,
the fixer the scan's findings of the same file, so both get the same answer.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable

AVAILABILITY = "torch.cuda.is_available"
_TESTS = (ast.If, ast.While, ast.IfExp, ast.BoolOp, ast.Assert)


def cuda_only(symbol: str, manual: bool) -> bool:
    """A finding the fix leaves as it is that raises without CUDA: a manual `torch.cuda.*` use."""
    return manual and symbol.startswith("torch.cuda.") and symbol != AVAILABILITY


# the statements `guarded_calls` looks at: assignments (a flag) and tests; its other nodes: `IfExp`, `BoolOp`
GUARD_STATEMENTS = frozenset({ast.Assign, ast.AnnAssign, ast.If, ast.While, ast.Assert})


def guarded_calls(tree: ast.AST, availability: Iterable[int], calls: Iterable[tuple[int, str]],
                  nodes: Iterable[ast.AST] | None = None) -> dict[int, str]:
    """Line of each availability check -> "`symbol`" of the first CUDA-only call it guards (no line number:
    the reason goes into the fix record, and the fix's own edits move lines, so a rerun would change it).
    `availability`: lines of the checks; `calls`: (line, symbol) of the CUDA-only calls that stay; `nodes`:
    the tree's nodes of those kinds (any order) where the caller collected them, else the tree is walked."""
    lines = set(availability)
    calls = sorted(calls)
    if not lines or not calls:
        return {}
    nodes = list(ast.walk(tree) if nodes is None else nodes)
    guarded: dict[int, str] = {}
    for line in sorted(lines):
        regions = _regions(nodes, _flags_of(nodes, line), line)
        hit = next(((n, s) for n, s in calls if any(a <= n <= b for a, b in regions)), None)
        if hit is not None:
            guarded[line] = f"`{hit[1]}`"
    return guarded


def _spans(node: ast.AST, line: int) -> bool:
    return getattr(node, "lineno", 0) <= line <= (getattr(node, "end_lineno", None) or 0)


def _checks_at(node: ast.AST, line: int) -> bool:
    """An availability call (`...is_available()`) on this line inside `node`."""
    return any(isinstance(n, ast.Call) and isinstance(n.func, (ast.Attribute, ast.Name))
               and (n.func.attr if isinstance(n.func, ast.Attribute) else n.func.id) == "is_available"
               and n.lineno <= line <= (n.end_lineno or n.lineno) for n in ast.walk(node))


def _flags_of(nodes: list[ast.AST], line: int) -> set[str]:
    """The names (`cuda`, `self.cuda`) the check on this line is assigned to."""
    flags: set[str] = set()
    for node in nodes:
        if isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None and _spans(node.value, line) \
                and _checks_at(node.value, line):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            flags.update(ast.unparse(t) for t in targets if isinstance(t, (ast.Name, ast.Attribute)))
    return flags


def _test_of(node: ast.AST) -> ast.AST:
    return node if isinstance(node, ast.BoolOp) else node.test  # type: ignore[attr-defined]


def _regions(nodes: list[ast.AST], flags: set[str], line: int) -> list[tuple[int, int]]:
    """Spans of the statements and expressions whose test reads a flag or holds the check itself
    (a flag is matched by its text across the module: `self.cuda` set in `__init__`, read elsewhere)."""
    out = []
    for node in nodes:
        if not isinstance(node, _TESTS):
            continue
        test = _test_of(node)
        reads = bool(flags) and any(isinstance(n, (ast.Name, ast.Attribute)) and ast.unparse(n) in flags
                                    for n in ast.walk(test))
        if reads or (_spans(test, line) and _checks_at(test, line)):
            out.append((node.lineno, node.end_lineno or node.lineno))
    return out
