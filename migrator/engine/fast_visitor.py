"""`ast.NodeVisitor` in the same order, for less: the scanner's one traversal visits every node of every
module, and the standard visitor pays per node a `getattr` for the handler's name, a generator
(`iter_fields`) and a call for each of the ~30 % of nodes that are contexts (`Load`, `Store`) or operators.

Here each node class gets, once per visitor class, a function that visits its child fields by name (generated
from the class's ASDL signature: `Call(expr func, expr* args, keyword* keywords)`), so a node costs one
table lookup and one call; fields that hold no nodes (identifiers, constants) and the contexts and operators,
which no handler looks at, are never touched.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable, Iterator
from typing import Any, ClassVar

# fields that hold only leaf nodes no handler is written for (`ast.expr_context`, operators)
_LEAF_FIELDS = frozenset({"ctx", "op", "ops"})
# ASDL builtin types: a field of one of these holds no node
_PRIMITIVE = frozenset({"identifier", "string", "int", "constant", "object", "bytes"})
_FIELDS: dict[type, tuple[str, ...]] = {}
_SIGNATURE_FIELD = re.compile(r"(\w+)([*?]?) (\w+)")

Handler = Callable[[Any, Any], None]


def _child_fields(cls: type) -> tuple[str, ...]:
    fields = _FIELDS[cls] = tuple(f for f in getattr(cls, "_fields", ()) if f not in _LEAF_FIELDS)
    return fields


def _ignore(_visitor: Any, _value: Any) -> None:
    """What a visit of a value that is no node (None in a list, a string) does."""


def _children_source(cls: type) -> str:
    """The source of a function that visits a node's children in field order (`H`: the handler table)."""
    kinds = {name: (kind, mark) for kind, mark, name in _SIGNATURE_FIELD.findall(cls.__doc__ or "")}
    lines = []
    for name in _child_fields(cls):
        kind, mark = kinds.get(name, ("", "unknown"))
        if kind in _PRIMITIVE:
            continue
        if mark == "*":  # a list; `Dict.keys` and `kw_defaults` may hold None (`_ignore`d)
            lines.append(f"    for child in node.{name}:\n        H[child.__class__](visitor, child)")
        elif mark == "?":
            lines += [f"    child = node.{name}", "    if child is not None:", "        H[child.__class__](visitor, child)"]
        elif mark == "":
            lines += [f"    child = node.{name}", "    H[child.__class__](visitor, child)"]
        else:  # a signature not understood: whatever the field holds at run time
            lines += [f"    child = getattr(node, {name!r}, None)", "    if child.__class__ is list:",
                      "        for item in child:\n            H[item.__class__](visitor, item)",
                      "    else:\n        H[child.__class__](visitor, child)"]
    return "def children(visitor, node):\n" + ("\n".join(lines) or "    pass")


class _ChildrenTable(dict):
    """Node class -> the function that visits its children through `handlers`; made on first use."""

    def __init__(self, handlers: _HandlerTable) -> None:
        super().__init__()
        self.handlers = handlers

    def __missing__(self, cls: type) -> Handler:
        namespace: dict[str, Any] = {"H": self.handlers}
        exec(_children_source(cls), namespace)  # noqa: S102 - source built from the ast classes' own fields
        self[cls] = namespace["children"]
        return self[cls]


class _HandlerTable(dict):
    """Node class -> the visitor class's `visit_<Class>` handler, or its children's visit; filled on first use."""

    def __init__(self, visitor_class: type) -> None:
        super().__init__()
        self.visitor_class = visitor_class
        self.children = _ChildrenTable(self)

    def __missing__(self, cls: type) -> Handler:
        if not (isinstance(cls, type) and issubclass(cls, ast.AST)):
            self[cls] = _ignore
            return _ignore
        handler = getattr(self.visitor_class, "visit_" + cls.__name__, None) or self.children[cls]
        self[cls] = handler
        return handler


class FastVisitor(ast.NodeVisitor):
    """A `NodeVisitor` (`visit_<Class>` handlers that call `generic_visit` to go on) with the same visiting
    order; subclasses must not define handlers for contexts or operators, nor override `generic_visit`."""

    _handlers: ClassVar[_HandlerTable]
    _children: ClassVar[_ChildrenTable]

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls._handlers = _HandlerTable(cls)
        cls._children = cls._handlers.children

    def visit(self, node: ast.AST) -> Any:
        self._handlers[node.__class__](self, node)

    def generic_visit(self, node: ast.AST) -> Any:
        self._children[node.__class__](self, node)


def child_nodes(node: ast.AST) -> Iterator[ast.AST]:
    """`ast.iter_child_nodes` in its order, without contexts and operators (one generator, not two)."""
    for name in _FIELDS.get(type(node)) or _child_fields(type(node)):
        value = getattr(node, name, None)
        if type(value) is list:
            for item in value:
                if isinstance(item, ast.AST):
                    yield item
        elif isinstance(value, ast.AST):
            yield value
