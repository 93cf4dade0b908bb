"""`ast.walk` as a list, for the passes after the checker's traversal that look at every node of a module or
function (the perf lint's module-wide sites, the import checks' name counts, the Triton passes).

Same nodes in the same (breadth-first) order, less the contexts (`Load`, `Store`) and operators, which no such
pass looks at and which have no children (so leaving them out moves no other node); each class's fields are
looked up once, and there is no generator per node (`ast.walk` runs two per node, `iter_child_nodes` over
`iter_fields`).
"""

from __future__ import annotations

import ast

# fields that hold only contexts and operators (leaves)
_LEAF_FIELDS = frozenset({"ctx", "op", "ops"})
_FIELDS: dict[type, tuple[str, ...]] = {}


def child_fields(kind: type) -> tuple[str, ...]:
    """The fields of a node class that may hold other nodes than contexts and operators, in field order."""
    fields = _FIELDS.get(kind)
    if fields is None:
        fields = _FIELDS[kind] = tuple(f for f in getattr(kind, "_fields", ()) if f not in _LEAF_FIELDS)
    return fields


def children(node: ast.AST) -> list[ast.AST]:
    """`list(ast.iter_child_nodes(node))` without contexts and operators, in the same order."""
    out: list[ast.AST] = []
    for name in _FIELDS.get(node.__class__) or child_fields(node.__class__):
        value = getattr(node, name, None)
        if value.__class__ is list:
            out.extend([item for item in value if isinstance(item, ast.AST)])
        elif isinstance(value, ast.AST):
            out.append(value)
    return out


def walk_nodes(node: ast.AST) -> list[ast.AST]:
    """`list(ast.walk(node))` without contexts and operators, in the same order."""
    out: list[ast.AST] = [node]
    fields_of = _FIELDS
    i = 0
    while i < len(out):
        current = out[i]
        i += 1
        kind = current.__class__
        fields = fields_of.get(kind) or child_fields(kind)
        for name in fields:
            value = getattr(current, name, None)
            if value.__class__ is list:
                out.extend([item for item in value if isinstance(item, ast.AST)])
            elif isinstance(value, ast.AST):
                out.append(value)
    return out
