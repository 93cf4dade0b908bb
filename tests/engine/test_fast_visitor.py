"""The checker's traversal (`engine/fast_visitor.py`) visits what `ast.NodeVisitor` visits, in its order,
leaving out only contexts and operators, and calls a class's handler wherever the standard visitor would."""

from __future__ import annotations

import ast

from migrator.engine.fast_visitor import FastVisitor, child_nodes

SOURCE = '''
import os, torch as t
from a.b import c as d
from e import *
@decorator(x=1)
async def f(a, /, b: int = 2, *args, c: "str", d=None, **kw) -> list["X"]:
    global g
    y = {**kw, "k": [i async for i in a if i], None: lambda q, *, r=3: q + r}
    z: dict[str, int] = {k: v for k, v in kw.items()}
    del y[0], z
    async with t.cuda.device(0) as dev, open(p) as fh:
        await dev.run(f"{a!r:>{b}} and {c}")
    try:
        raise ValueError() from None
    except (KeyError, ValueError) as err:
        pass
    else:
        assert a is not b, "msg"
    finally:
        return -a if a else ~b
class K(Base, metaclass=Meta):
    x: int
    def m(self):
        nonlocal_value = (yield from range(3))
        while not self.x < 1 <= 2:
            break
        for i, (j, k) in enumerate([]):
            continue
match command:
    case [1, *rest] | {"key": _, **others} if rest:
        pass
    case Point(x=0, y=y) as p:
        print(b"bytes", 1j, ..., t[1:2, ::3])
'''


class Recording(ast.NodeVisitor):
    """The standard visitor, recording every node it reaches (contexts and operators left out)."""

    def __init__(self) -> None:
        self.seen: list[ast.AST] = []

    def generic_visit(self, node: ast.AST) -> None:
        if not isinstance(node, (ast.expr_context, ast.operator, ast.unaryop, ast.cmpop, ast.boolop)):
            self.seen.append(node)
        super().generic_visit(node)


class FastRecording(FastVisitor):
    """The same through FastVisitor: a handler for two classes (one stops, one goes on), the rest generic."""

    def __init__(self) -> None:
        self.seen: list[ast.AST] = []
        self.handled: list[ast.AST] = []

    def visit_Call(self, node: ast.Call) -> None:
        self.handled.append(node)
        self.generic_visit(node)

    def visit_Lambda(self, node: ast.Lambda) -> None:
        self.handled.append(node)  # its children left unvisited


def _generic_order(tree: ast.AST, visitor: type[FastVisitor]) -> list[ast.AST]:
    class Everything(visitor):  # type: ignore[valid-type, misc]
        pass

    seen: list[ast.AST] = []
    for cls in {type(n) for n in ast.walk(tree)}:
        setattr(Everything, "visit_" + cls.__name__, lambda self, node: (seen.append(node), self.generic_visit(node)))
    Everything().visit(tree)
    return seen


def test_every_node_in_the_standard_order() -> None:
    tree = ast.parse(SOURCE)
    expected = Recording()
    expected.visit(tree)
    assert _generic_order(tree, FastVisitor) == expected.seen
    assert len(expected.seen) > 150  # the source reaches most node classes


def test_leaves_reached_through_classes_without_handlers() -> None:
    class Names(FastVisitor):
        def __init__(self) -> None:
            self.seen: list[ast.AST] = []

        def visit_Name(self, node: ast.Name) -> None:
            self.seen.append(node)

    tree = ast.parse(SOURCE)
    expected = Recording()
    expected.visit(tree)
    names = Names()
    names.visit(tree)
    assert names.seen == [n for n in expected.seen if isinstance(n, ast.Name)]


def test_handlers_replace_the_generic_visit() -> None:
    tree = ast.parse(SOURCE)
    fast = FastRecording()
    fast.visit(tree)
    calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call)]
    lambdas = [n for n in ast.walk(tree) if isinstance(n, ast.Lambda)]
    assert sorted(map(id, fast.handled)) == sorted(map(id, calls + lambdas))  # the lambda holds no call
    assert len(lambdas) == 1


def test_child_nodes_in_the_standard_order() -> None:
    for node in ast.walk(ast.parse(SOURCE)):
        standard = [c for c in ast.iter_child_nodes(node)
                    if not isinstance(c, (ast.expr_context, ast.operator, ast.unaryop, ast.cmpop, ast.boolop))]
        assert list(child_nodes(node)) == standard
