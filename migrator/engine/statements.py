"""Walks over a module's statements that need no checker state: every statement at any depth, and the
imports that sit in a `try:` whose ImportError handler falls back (optional on Ascend)."""

from __future__ import annotations

import ast
from collections.abc import Iterable, Iterator
from typing import NamedTuple

from migrator.engine.guards import GUARD_STATEMENTS
from migrator.engine.sites import dotted

BLOCK_FIELDS = ("body", "orelse", "finalbody", "handlers", "cases")  # where statements hold statements
BLOCKS: dict[type, tuple[str, ...]] = {}  # statement class -> its `BLOCK_FIELDS` (`block_fields`)


def block_fields(cls: type) -> tuple[str, ...]:
    """The fields of a statement class that hold statements, looked up once per class."""
    fields = BLOCKS[cls] = tuple(f for f in BLOCK_FIELDS if f in getattr(cls, "_fields", ()))
    return fields


def iter_statements(tree: ast.AST) -> Iterator[ast.stmt]:
    """Every statement, at any depth, without descending into expressions (cheap)."""
    return iter(statement_list(tree))


def statement_list(tree: ast.AST) -> list[ast.stmt]:
    """`iter_statements` as a list (the checker's set-up passes share it); each statement class's block fields
    are looked up once, not asked of every statement."""
    out: list[ast.stmt] = []
    stack = list(getattr(tree, "body", ()))
    blocks = BLOCKS
    while stack:
        node = stack.pop()
        out.append(node)
        fields = blocks.get(type(node))
        if fields is None:
            fields = block_fields(type(node))
        for name in fields:
            children = getattr(node, name, None)
            if children:
                stack.extend(children)
    return out


# the statements each set-up pass looks at: imports and `x = import_module(...)`; `try:`; what has a docstring
BINDING_STATEMENTS = frozenset({ast.Import, ast.ImportFrom, ast.Assign})
TRY_STATEMENTS = frozenset({getattr(ast, name) for name in ("Try", "TryStar") if hasattr(ast, name)})
SCOPE_STATEMENTS = frozenset({ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef})


def may_bind_module(value: ast.expr) -> bool:
    """What `bound_module` can accept: `f("mod")` or `f("mod")[0]` (most assignments are neither)."""
    if type(value) is ast.Subscript:
        return True
    return type(value) is ast.Call and bool(value.args) and type(value.args[0]) is ast.Constant


class SortedStatements(NamedTuple):
    """A module's statements sorted for the checker's set-up passes, each in the walk's order."""

    bindings: list[ast.stmt]  # imports and the assignments `bound_module`/`attribute_modules` can read
    tries: list[ast.stmt]
    scopes: list[ast.stmt]  # classes and functions
    guard_nodes: list[ast.AST]  # the assignments and tests `guards.guarded_calls` reads
    docstrings: list[ast.Constant]  # the module's, then its scopes' (`docstrings`)


# what the walk does with a statement of a class: (a guard node?, the list it joins, its block fields); None: nothing
# (`Expr`, `Return`, `AugAssign`, `Raise` ...: most statements that are not assignments)
_Plan = tuple[bool, int, tuple[str, ...]]
_BINDING, _TRY, _SCOPE = 1, 2, 3
_PLANS: dict[type, _Plan | None] = {}


def _plan(kind: type) -> _Plan | None:
    role = (_BINDING if kind in BINDING_STATEMENTS else _TRY if kind in TRY_STATEMENTS
            else _SCOPE if kind in SCOPE_STATEMENTS else 0)
    guard, fields = kind in GUARD_STATEMENTS, block_fields(kind)
    plan = _PLANS[kind] = (guard, role, fields) if guard or role or fields else None
    return plan


def _docstring(body: list[ast.stmt]) -> ast.Constant | None:
    first = body[0] if body else None
    if type(first) is ast.Expr and type(first.value) is ast.Constant and type(first.value.value) is str:
        return first.value
    return None


def sorted_statements(tree: ast.AST) -> SortedStatements:
    """One walk over every statement (`statement_list`'s, in its order), sorted for the set-up passes that each
    look at a few kinds of them, and the docstrings read on the way (`docstrings`). Each statement class's part
    is looked up once (`_PLANS`), assignments tested inline (`may_bind_module`: most statements are these)."""
    bindings: list[ast.stmt] = []
    guard_nodes: list[ast.AST] = []
    out = SortedStatements(bindings, [], [], guard_nodes, [])
    if isinstance(tree, ast.Module) and (doc := _docstring(tree.body)) is not None:
        out.docstrings.append(doc)
    stack = list(getattr(tree, "body", ()))
    lists: tuple[list[ast.stmt], ...] = ([], bindings, out.tries, out.scopes)  # by role (0: none)
    plans, docs = _PLANS, out.docstrings
    assign, plain_name, call, subscript, constant = ast.Assign, ast.Name, ast.Call, ast.Subscript, ast.Constant
    while stack:
        statement = stack.pop()
        kind = type(statement)
        if kind is assign:  # a guard node, and one the binding passes read if it is `x = f("mod")`, `f("mod")[0]`,
            guard_nodes.append(statement)  # `self.x = mod`; no block of statements
            value = statement.value
            value_kind = type(value)
            if value_kind is plain_name or value_kind is subscript or (
                    value_kind is call and value.args and type(value.args[0]) is constant):
                bindings.append(statement)
            continue
        try:
            plan = plans[kind]
        except KeyError:
            plan = _plan(kind)
        if plan is None:
            continue
        guard, role, fields = plan
        if guard:
            guard_nodes.append(statement)
        if role:
            lists[role].append(statement)
            if role == _SCOPE and (doc := _docstring(statement.body)) is not None:
                docs.append(doc)
        for name in fields:
            children = getattr(statement, name, None)
            if children:
                stack.extend(children)
    return out


IMPORT_ERRORS = {"ImportError", "ModuleNotFoundError", "Exception", "BaseException"}


def _catches_import_error(handler: ast.ExceptHandler) -> bool:
    if handler.type is None:
        return True
    types = handler.type.elts if isinstance(handler.type, ast.Tuple) else [handler.type]
    names = {t.id if isinstance(t, ast.Name) else t.attr if isinstance(t, ast.Attribute) else "" for t in types}
    return bool(names & IMPORT_ERRORS)


def _falls_back(handler: ast.ExceptHandler) -> bool:
    """The handler catches ImportError and carries on (sets a flag, binds a stand-in), not re-raise or exit."""
    if not _catches_import_error(handler):
        return False
    for stmt in handler.body:
        if isinstance(stmt, ast.Raise):
            return False
        if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call):
            func = dotted(stmt.value.func)
            if func and func[-1] in ("exit", "_exit"):
                return False
    return True


def import_library(module: str) -> str:
    """What an import finding counts once per file: the top-level package (`transformer_engine`), or
    for torch's own CUDA parts the module (`torch.utils.cpp_extension`, `torch.cuda`)."""
    top = module.split(".")[0]
    return module if top == "torch" else top


def guarded_imports(tree: ast.AST, statements: Iterable[ast.stmt] | None = None) -> set[int]:
    """ids of the import statements inside `try:` blocks whose ImportError handler falls back:
    the module works without the library, so the import is optional on Ascend."""
    out: set[int] = set()
    for node in iter_statements(tree) if statements is None else statements:
        handlers = getattr(node, "handlers", ()) if type(node).__name__ in ("Try", "TryStar") else ()
        if any(_falls_back(h) for h in handlers):
            inner = ast.Module(body=list(getattr(node, "body", ())), type_ignores=[])
            out.update(id(s) for s in iter_statements(inner) if isinstance(s, (ast.Import, ast.ImportFrom)))
    return out
