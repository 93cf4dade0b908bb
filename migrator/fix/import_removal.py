"""Removing the imports of fixed CUDA-only libraries whose last use the fix rewrote, and counting the
names a module uses (for that and for the imports `fix/imports.py` adds)."""

from __future__ import annotations

from typing import TypeVar

import libcst as cst

AnyImport = TypeVar("AnyImport", cst.Import, cst.ImportFrom)


def bound_name(alias: cst.ImportAlias) -> str:
    if alias.asname is not None and isinstance(alias.asname.name, cst.Name):
        return alias.asname.name.value
    name: cst.BaseExpression = alias.name
    while isinstance(name, cst.Attribute):
        name = name.value
    return name.value  # type: ignore[attr-defined]  # the innermost part is a Name


class _NameCounter(cst.CSTVisitor):
    def __init__(self) -> None:
        self.counts: dict[str, int] = {}

    def visit_Import(self, node: cst.Import) -> bool:
        return False

    def visit_ImportFrom(self, node: cst.ImportFrom) -> bool:
        return False

    def visit_Attribute(self, node: cst.Attribute) -> bool:
        node.value.visit(self)  # `x.GradScaler` uses x, not a name GradScaler
        return False

    def visit_Name(self, node: cst.Name) -> None:
        self.counts[node.value] = self.counts.get(node.value, 0) + 1


def name_counts(module: cst.Module) -> dict[str, int]:
    counter = _NameCounter()
    module.visit(counter)
    return counter.counts


class _ImportRemover(cst.CSTTransformer):
    def __init__(self, unused: set[str]) -> None:
        self.unused = unused

    def _keep(self, alias: cst.ImportAlias) -> bool:
        return bound_name(alias) not in self.unused

    def leave_Import(self, original: cst.Import, updated: cst.Import) -> cst.Import | cst.RemovalSentinel:
        return self._without_unused(updated)

    def leave_ImportFrom(self, original: cst.ImportFrom, updated: cst.ImportFrom) -> cst.ImportFrom | cst.RemovalSentinel:
        return self._without_unused(updated)

    def _without_unused(self, updated: AnyImport) -> AnyImport | cst.RemovalSentinel:
        if isinstance(updated.names, cst.ImportStar):
            return updated  # binds no name that could have become unused
        names = [a for a in updated.names if self._keep(a)]
        if len(names) == len(updated.names):
            return updated
        if not names:
            return cst.RemoveFromParent()
        names[-1] = names[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT)
        return updated.with_changes(names=names)

    def leave_SimpleStatementLine(
        self, original: cst.SimpleStatementLine, updated: cst.SimpleStatementLine
    ) -> cst.SimpleStatementLine | cst.RemovalSentinel:
        if not updated.body:
            return cst.RemoveFromParent()
        return updated

    def leave_IndentedBlock(self, original: cst.IndentedBlock, updated: cst.IndentedBlock) -> cst.IndentedBlock:
        if not updated.body:  # a try: body that held only the removed import
            return updated.with_changes(body=[cst.SimpleStatementLine([cst.Pass()])])
        return updated

    def leave_Try(self, original: cst.Try, updated: cst.Try) -> cst.Try | cst.RemovalSentinel:
        """`try: <removed imports> except ImportError: ...` has nothing left to guard: drop it."""
        body = updated.body.body
        only_pass = all(
            isinstance(s, cst.SimpleStatementLine) and all(isinstance(x, cst.Pass) for x in s.body) for s in body
        )
        if only_pass and not original.body.body == updated.body.body and _guards_imports(updated):
            return cst.RemoveFromParent()
        return updated


def _guards_imports(node: cst.Try) -> bool:
    if node.orelse is not None or node.finalbody is not None:
        return False
    for handler in node.handlers:
        if handler.type is None:
            continue
        names = [handler.type] if not isinstance(handler.type, cst.Tuple) else [e.value for e in handler.type.elements]
        if not all(isinstance(n, cst.Name) and n.value in ("ImportError", "ModuleNotFoundError") for n in names):
            return False
    return True


def remove_unused_imports(before: cst.Module, after: cst.Module, candidates: set[str]) -> tuple[cst.Module, set[str]]:
    """Drop imports of fixed CUDA-only libraries whose bound name is used before but not after."""
    if not candidates:
        return after, set()
    used_before = name_counts(before)
    used_after = name_counts(after)
    unused = {n for n in candidates if used_before.get(n, 0) > 0 and used_after.get(n, 0) == 0}
    return (after.visit(_ImportRemover(unused)) if unused else after), unused
