"""Walks over a module's statements that need no checker state: every statement at any depth, and the
imports that sit in a `try:` whose ImportError handler falls back (optional on Ascend)."""

from __future__ import annotations

import ast
from collections.abc import Iterable, Iterator

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


def docstrings(tree: ast.AST, statements: Iterable[ast.stmt] | None = None) -> list[ast.Constant]:
    """The docstrings of the module and of its classes and functions (`statements`: all of them, if known)."""
    out = []
    for node in (tree, *(iter_statements(tree) if statements is None else statements)):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                if isinstance(body[0].value.value, str):
                    out.append(body[0].value)
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
