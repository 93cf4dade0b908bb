"""`ast.NodeVisitor` in the same order, for less: the scanner's one traversal visits every node of every
module, and the standard visitor pays per node a `getattr` for the handler's name, a generator
(`iter_fields`) and a call for each of the ~30 % of nodes that are contexts (`Load`, `Store`) or operators.

Here each node class gets, once per visitor class, a function that visits its child fields by name (generated
from the class's ASDL signature: `Call(expr func, expr* args, keyword* keywords)`), so a node costs one
table lookup and one call; fields that hold no nodes (identifiers, constants) and the contexts and operators,
which no handler looks at, are never touched. A class may also say which leaves its handlers ignore
(`NAMES_VISITED`, `CONSTANTS_IGNORED`, `LEAVES_SKIPPED`): the generated functions then test those inline, without a
call.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable, Iterable, Iterator
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


def _dispatch(indent: str, value: str, kind: str | None = None) -> list[str]:
    """Lines that call the handler of `value` (a local; `kind`: a local holding its class, if one does): a plain
    dict's lookup (a dict subclass with `__missing__` pays a Python-level `__getitem__` on every lookup), `M`
    filling a class not yet seen."""
    kind = kind or f"type({value})"
    return [f"{indent}try:", f"{indent}    handler = H[{kind}]", f"{indent}except KeyError:",
            f"{indent}    handler = M({kind})", f"{indent}handler(visitor, {value})"]


def _leaf_dispatch(indent: str, value: str, visitor: type, field: type = ast.expr) -> list[str]:
    """`_dispatch` for a node of a field of the class `field` (`ast.expr`, `ast.arg`), the leaves the visitor class
    ignores tested first: a `Name` whose id is not in the visitor's `NAMES_VISITED` container, a constant whose
    value's class is in `CONSTANTS_IGNORED`, a node its `LEAVES_SKIPPED` test holds for (most leaves: no lookup, no
    call)."""
    names: str | None = getattr(visitor, "NAMES_VISITED", None) if field is ast.expr else None
    constants: frozenset[type] = getattr(visitor, "CONSTANTS_IGNORED", frozenset()) if field is ast.expr else frozenset()
    skipped = [(cls, test) for cls, test in getattr(visitor, "LEAVES_SKIPPED", {}).items() if issubclass(cls, field)]
    if names is None and not constants and not skipped:
        return _dispatch(indent, value)
    assert value == "child" or not skipped, value
    lines = [f"{indent}kind = type({value})"]
    tests = []
    if names is not None:
        tests.append(("NAME", f"{value}.id in visitor.{names}"))
    if constants:
        tests.append(("CONSTANT", f"type({value}.value) not in IGNORED"))
    tests += [(_class_global(cls), f"not ({test})") for cls, test in skipped]  # (its tests name the node `child`)
    for i, (cls_global, visited) in enumerate(tests):
        lines += [f"{indent}{'elif' if i else 'if'} kind is {cls_global}:", f"{indent}    if {visited}:",
                  *_dispatch(indent + "        ", value, "kind")]
    return [*lines, f"{indent}else:", *_dispatch(indent + "    ", value, "kind")]


def _class_global(cls: type) -> str:
    """The name a generated function knows a node class by (`_Tables._namespace`)."""
    return "CLASS_" + cls.__name__


def _children_source(cls: type, visitor: type = object) -> str:
    """The source of a function that visits a node's children in field order (`H`: the handler table of
    `visitor`, whose ignored leaves are tested inline; a `keyword` it has no handler for is gone through to its
    value)."""
    kinds = {name: (kind, mark) for kind, mark, name in _SIGNATURE_FIELD.findall(cls.__doc__ or "")}
    lines = []
    for name in _child_fields(cls):
        kind, mark = kinds.get(name, ("", "unknown"))
        if kind in _PRIMITIVE:
            continue
        field = getattr(ast, kind, None)  # the class of the field's nodes (`ast.expr`, `ast.arg`)

        def dispatch(indent: str, value: str, field: Any = field) -> list[str]:
            return _leaf_dispatch(indent, value, visitor, field) if isinstance(field, type) else _dispatch(indent, value)
        if kind == "keyword" and mark == "*" and not hasattr(visitor, "visit_keyword"):
            lines += [f"    for keyword in node.{name}:", "        child = keyword.value",
                      *_leaf_dispatch("        ", "child", visitor)]
        elif mark == "*":  # a list; `Dict.keys` and `kw_defaults` may hold None (`_ignore`d)
            lines += [f"    for child in node.{name}:", *dispatch("        ", "child")]
        elif mark == "?":
            lines += [f"    child = node.{name}", "    if child is not None:", *dispatch("        ", "child")]
        elif mark == "":
            lines += [f"    child = node.{name}", *dispatch("    ", "child")]
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

    def _namespace(self) -> dict[str, Any]:
        """The globals of the generated functions."""
        skipped = getattr(self.visitor_class, "LEAVES_SKIPPED", {})
        return {"H": self.handlers, "M": self.handler, "NAME": ast.Name, "CONSTANT": ast.Constant,
                "IGNORED": getattr(self.visitor_class, "CONSTANTS_IGNORED", frozenset()),
                **{_class_global(cls): cls for cls in skipped}}

    def expressions(self) -> Handler:
        """A function that visits a sequence of expressions as a node's list field would (`_leaf_dispatch`)."""
        lines = _leaf_dispatch("        ", "child", self.visitor_class)
        namespace = self._namespace()
        exec("def visit_expressions(visitor, nodes):\n    for child in nodes:\n" + "\n".join(lines), namespace)  # noqa: S102
        return namespace["visit_expressions"]

    def children_of(self, cls: type) -> Handler:
        namespace = self._namespace()
        exec(_children_source(cls, self.visitor_class), namespace)  # noqa: S102 - source built from the ast classes' own fields
        self.children[cls] = namespace["children"]
        return self.children[cls]


class FastVisitor(ast.NodeVisitor):
    """A `NodeVisitor` (`visit_<Class>` handlers that call `generic_visit` to go on) with the same visiting
    order; subclasses must not define handlers for contexts or operators, nor override `generic_visit`."""

    # the leaves a subclass's handlers ignore, so the children's visit need not call them: `NAMES_VISITED`, the
    # name of an attribute of the visitor holding the only `Name` ids whose handler acts (a `Name` child with
    # another id is not visited); `CONSTANTS_IGNORED`: the classes of the values its `Constant` handler does
    # nothing for; `LEAVES_SKIPPED`: node class -> a test (Python source over the node, named `child`, and `visitor`)
    # that holds where its handler would do nothing for the node, so that it is not called
    NAMES_VISITED: ClassVar[str | None] = None
    CONSTANTS_IGNORED: ClassVar[frozenset[type]] = frozenset()
    LEAVES_SKIPPED: ClassVar[dict[type, str]] = {}
    _handlers: ClassVar[dict[type, Handler]]
    _children: ClassVar[dict[type, Handler]]
    _tables: ClassVar[_Tables]

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls._tables = _Tables(cls)
        cls._handlers = cls._tables.handlers
        cls._children = cls._tables.children
        cls.visit_expressions = cls._tables.expressions()  # type: ignore[method-assign, assignment]

    def visit(self, node: ast.AST) -> Any:
        try:
            handler = self._handlers[type(node)]
        except KeyError:
            handler = self._tables.handler(type(node))
        handler(self, node)

    def visit_expressions(self, nodes: Iterable[ast.AST]) -> None:
        """Visit each expression in turn, as a list field of a node is visited (made per class, see `_Tables`)."""
        for node in nodes:
            self.visit(node)

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
