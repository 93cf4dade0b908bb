"""What a receiver was built by: `opt = NpuFusedAdamW(...)` then `opt.zero_grad(...)` in the same function.

Asked rarely (a detector's question about one call), so the scopes are indexed on the first question.
"""

from __future__ import annotations

import ast
from collections.abc import Callable

from migrator.engine.statements import statement_list

_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)


class Bindings:
    def __init__(self, tree: ast.AST, qualnames: Callable[[ast.AST], set[str]]) -> None:
        self._tree = tree
        self._qualnames = qualnames
        self._scope_of: dict[int, ast.AST] | None = None  # id of each node -> its innermost function (or the module)
        self._built: dict[tuple[int, str], set[str]] = {}  # (scope id, target text) -> qualnames of its calls
        self.everywhere: set[str] = set()  # qualnames of every call assigned anywhere in the module
        self._everywhere_known = False  # `everywhere` filled (by the index, or by a walk of the statements only)

    def _index(self) -> dict[int, ast.AST]:
        if self._scope_of is None:
            self._scope_of = {}
            self.everywhere = set()  # filled again by the walk, with the scopes
            self._walk(self._tree, self._tree)
            self._everywhere_known = True
        return self._scope_of

    def _walk(self, node: ast.AST, scope: ast.AST) -> None:
        assert self._scope_of is not None
        for child in ast.iter_child_nodes(node):
            self._scope_of[id(child)] = scope
            if isinstance(child, ast.Assign) and isinstance(child.value, ast.Call):
                names = self._qualnames(child.value.func)
                self.everywhere |= names
                for target in child.targets:
                    if isinstance(target, (ast.Name, ast.Attribute)):
                        self._built.setdefault((id(scope), ast.unparse(target)), set()).update(names)
            self._walk(child, child if isinstance(child, _SCOPES) else scope)

    def built_by(self, node: ast.AST) -> set[str]:
        """Qualified names of the calls assigned to this expression's text in its function (or module)."""
        scope = self._index().get(id(node), self._tree)
        return self._built.get((id(scope), ast.unparse(node)), set())

    def module_calls(self) -> set[str]:
        """Qualified names of every call assigned anywhere in the module: an assignment is a statement, so a walk of
        the statements finds them all, without the index of every node's scope (`built_by`'s)."""
        if not self._everywhere_known:
            for statement in statement_list(self._tree):
                if type(statement) is ast.Assign and isinstance(statement.value, ast.Call):
                    self.everywhere |= self._qualnames(statement.value.func)
            self._everywhere_known = True
        return self.everywhere
