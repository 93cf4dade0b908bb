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


def _dispatch(indent: str, value: str) -> list[str]:
    """Lines that call the handler of `value` (a local): a plain dict's lookup (a dict subclass with
    `__missing__` pays a Python-level `__getitem__` on every lookup), `M` filling a class not yet seen."""
    return [f"{indent}try:", f"{indent}    handler = H[type({value})]", f"{indent}except KeyError:",
            f"{indent}    handler = M(type({value}))", f"{indent}handler(visitor, {value})"]


def _children_source(cls: type) -> str:
    """The source of a function that visits a node's children in field order (`H`: the handler table)."""
    kinds = {name: (kind, mark) for kind, mark, name in _SIGNATURE_FIELD.findall(cls.__doc__ or "")}
    lines = []
    for name in _child_fields(cls):
        kind, mark = kinds.get(name, ("", "unknown"))
        if kind in _PRIMITIVE:
            continue
        if mark == "*":  # a list; `Dict.keys` and `kw_defaults` may hold None (`_ignore`d)
            lines += [f"    for child in node.{name}:", *_dispatch("        ", "child")]
        elif mark == "?":
            lines += [f"    child = node.{name}", "    if child is not None:", *_dispatch("        ", "child")]
        elif mark == "":
            lines += [f"    child = node.{name}", *_dispatch("    ", "child")]
        else:  # a signature not understood: whatever the field holds at run time
            lines += [f"    child = getattr(node, {name!r}, None)", "    if type(child) is list:",
                      "        for item in child:", *_dispatch("            ", "item"),
                      "    else:", *_dispatch("        ", "child")]
    return "def children(visitor, node):\n" + ("\n".join(lines) or "    pass")


class _Tables:
    """A visitor class's two tables, plain dicts filled on first use of a node class: `handlers` (node
    class -> its `visit_<Class>` handler, or its children's visit) and `children` (node class -> the
    generated function that visits its children through `handlers`)."""

    def __init__(self, visitor_class: type) -> None:
        self.visitor_class = visitor_class
        self.handlers: dict[type, Handler] = {}
        self.children: dict[type, Handler] = {}

    def handler(self, cls: type) -> Handler:
        if not (isinstance(cls, type) and issubclass(cls, ast.AST)):
            handler: Handler = _ignore
        else:
            handler = getattr(self.visitor_class, "visit_" + cls.__name__, None) or self.children_of(cls)
        self.handlers[cls] = handler
        return handler

    def children_of(self, cls: type) -> Handler:
        namespace: dict[str, Any] = {"H": self.handlers, "M": self.handler}
        exec(_children_source(cls), namespace)  # noqa: S102 - source built from the ast classes' own fields
        self.children[cls] = namespace["children"]
        return self.children[cls]


class FastVisitor(ast.NodeVisitor):
    """A `NodeVisitor` (`visit_<Class>` handlers that call `generic_visit` to go on) with the same visiting
    order; subclasses must not define handlers for contexts or operators, nor override `generic_visit`."""

    _handlers: ClassVar[dict[type, Handler]]
    _children: ClassVar[dict[type, Handler]]
    _tables: ClassVar[_Tables]

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls._tables = _Tables(cls)
        cls._handlers = cls._tables.handlers
        cls._children = cls._tables.children

    def visit(self, node: ast.AST) -> Any:
        try:
            handler = self._handlers[type(node)]
        except KeyError:
            handler = self._tables.handler(type(node))
        handler(self, node)

    def generic_visit(self, node: ast.AST) -> Any:
        try:
            children = self._children[type(node)]
        except KeyError:
            children = self._tables.children_of(type(node))
        children(self, node)


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
