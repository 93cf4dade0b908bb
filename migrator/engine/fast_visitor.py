"""`ast.NodeVisitor` in the same order, for less: the scanner's one traversal visits every node of every
module, and the standard visitor pays per node a `getattr` for the handler's name, a generator
(`iter_fields`) and a call for each of the ~30 % of nodes that are contexts (`Load`, `Store`) or operators.

Here a handler is found once per node class (a class-level table), each class's child fields are listed
once, and the contexts and operators, which no handler looks at, are never visited.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Iterator
from typing import Any, ClassVar

# fields that hold only leaf nodes no handler is written for (`ast.expr_context`, operators)
_LEAF_FIELDS = frozenset({"ctx", "op", "ops"})
_FIELDS: dict[type, tuple[str, ...]] = {}


def _child_fields(cls: type) -> tuple[str, ...]:
    fields = _FIELDS[cls] = tuple(f for f in getattr(cls, "_fields", ()) if f not in _LEAF_FIELDS)
    return fields


class FastVisitor(ast.NodeVisitor):
    """A `NodeVisitor` (`visit_<Class>` handlers that call `generic_visit` to go on) with the same visiting
    order; subclasses must not define handlers for contexts or operators."""

    _handlers: ClassVar[dict[type, Callable[[Any, Any], None]]]

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls._handlers = {}

    def _handler(self, cls: type) -> Callable[[Any, Any], None]:
        handler = getattr(type(self), "visit_" + cls.__name__, None) or type(self).generic_visit
        self._handlers[cls] = handler
        return handler

    def visit(self, node: ast.AST) -> Any:
        cls = type(node)
        (self._handlers.get(cls) or self._handler(cls))(self, node)

    def generic_visit(self, node: ast.AST) -> Any:
        handlers = self._handlers
        for name in _FIELDS.get(type(node)) or _child_fields(type(node)):
            value = getattr(node, name, None)
            if type(value) is list:
                for item in value:
                    if isinstance(item, ast.AST):
                        cls = type(item)
                        (handlers.get(cls) or self._handler(cls))(self, item)
            elif isinstance(value, ast.AST):
                cls = type(value)
                (handlers.get(cls) or self._handler(cls))(self, value)


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
