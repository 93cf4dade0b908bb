"""Where an import binds its name and which of its uses count, for "is this import removable once its uses
are rewritten": the scan asks on its `ast` tree (`engine/sites.py`), the fixer on the `ast` of the text it
fixes (`fix/python_fixer.py`, whose libcst counts are indexed by the same functions), so both agree.

An import inside a function binds a local: only uses inside that function (its whole subtree, decorators
too, which over-counts and so keeps an import rather than removing a used one) can be its uses. An import
the function declares `global`/`nonlocal`, and any import outside functions, is judged on the whole
module. A module-level name listed in `__all__`, or bound by a module-level import of a package's
`__init__.py`, is a re-export: its import stays whatever the module itself does with it.
"""

from __future__ import annotations

import ast
from collections import Counter
from collections.abc import Callable
from functools import cached_property

from migrator.engine.node_walk import walk_nodes

FunctionNode = ast.FunctionDef | ast.AsyncFunctionDef
IMPORT_EXPORTED = "the import stays: the name is re-exported (`__all__`, or an import of a package's `__init__.py`)"


class ImportScopes:
    def __init__(self, tree: ast.AST, name_uses: Callable[[ast.AST], Counter[str]], package_init: bool = False) -> None:
        self.tree = tree
        self.name_uses = name_uses
        self.package_init = package_init
        self.functions: list[FunctionNode] = []  # in source (pre-)order, as libcst visits them
        self.declared: list[set[str]] = []  # names each function declares global or nonlocal
        self.scope_of: dict[int, int | None] = {}  # id of an import statement or alias -> its innermost function
        self.line_scope: dict[int, int | None] = {}  # each line of an import statement -> its innermost function
        self.imports: list[ast.Import | ast.ImportFrom] = []
        self._all_statements: list[ast.stmt] = []  # assignments and expression statements: where `__all__` is set
        self._walk(tree, None)

    def _walk(self, node: ast.AST, scope: int | None) -> None:
        """Every statement, in source (pre-)order: imports, functions and `global`s are statements, and only
        statement lists (bodies, handlers, cases) hold statements, so expressions are not entered."""
        for child in _statement_children(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                self.functions.append(child)
                self.declared.append(set())
                self._walk(child, len(self.functions) - 1)
                continue
            if child.__class__ in _SETTING_STATEMENTS:
                self._all_statements.append(child)  # type: ignore[arg-type]
            if isinstance(child, (ast.Global, ast.Nonlocal)) and scope is not None:
                self.declared[scope].update(child.names)
            if isinstance(child, (ast.Import, ast.ImportFrom)):
                self.imports.append(child)
                self.scope_of[id(child)] = scope
                self.scope_of.update((id(alias), scope) for alias in child.names)
                for line in range(child.lineno, (child.end_lineno or child.lineno) + 1):
                    self.line_scope[line] = scope
            self._walk(child, scope)

    def scope(self, import_node: ast.AST, bound: str) -> int | None:
        """The function whose local `bound` this import (statement or alias) binds, None for the module."""
        return self._bound_in(self.scope_of.get(id(import_node)), bound)

    def scope_at_line(self, line: int, bound: str) -> int | None:
        return self._bound_in(self.line_scope.get(line), bound)

    def _bound_in(self, scope: int | None, bound: str) -> int | None:
        return None if scope is None or bound in self.declared[scope] else scope

    def uses(self, scope: int | None) -> Counter[str]:
        if scope is None:
            return self._module_uses
        return self.name_uses(self.functions[scope])

    @cached_property
    def _module_uses(self) -> Counter[str]:
        return self.name_uses(self.tree)

    def inside(self, scope: int | None) -> set[int] | None:
        """Ids of the nodes of the function (None: the whole module, no filter)."""
        return None if scope is None else {id(n) for n in walk_nodes(self.functions[scope])}

    @cached_property
    def exported(self) -> set[str]:
        """Module-level names an importer of this module may rely on (`__all__`; every module-level import of
        a package's `__init__.py`)."""
        names: set[str] = set()
        # `__all__` is read where a name spells it, and the module's name counts (`uses(None)`, asked first
        # by the scan) hold every name: without one, no node of the walk below would add anything
        spelled = self._module_uses.get("__all__", 0)
        for node in self._setting_all(spelled) if spelled else ():
            if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                if any(isinstance(t, ast.Name) and t.id == "__all__" for t in targets) and node.value is not None:
                    names.update(_strings(node.value))
            elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in ("extend", "append")
                  and isinstance(node.func.value, ast.Name) and node.func.value.id == "__all__"):
                names.update(s for a in node.args for s in _strings(a))
        if self.package_init:
            names.update(alias.asname or alias.name.split(".")[0] for stmt in self.imports
                         if self.scope_of.get(id(stmt)) is None for alias in stmt.names if alias.name != "*")
        return names

    def _setting_all(self, spelled: int) -> list[ast.AST]:
        """The nodes `exported` reads: the statements assigning `__all__` and the `__all__.extend(...)` /
        `.append(...)` statements, where these hold every name `__all__` the module spells (`spelled`, its
        count); else every node of the module (one is elsewhere: `[__all__.append(n) for n in ...]`)."""
        found: list[ast.AST] = []
        names = 0
        for stmt in self._all_statements:
            if isinstance(stmt, ast.Expr):
                call = stmt.value
                if (isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute) and call.func.attr in ("extend", "append")
                        and isinstance(call.func.value, ast.Name) and call.func.value.id == "__all__"):
                    found.append(call)
                    names += 1
                continue
            targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]  # type: ignore[attr-defined]
            named = sum(1 for t in targets if isinstance(t, ast.Name) and t.id == "__all__")
            if named:
                found.append(stmt)
                names += named
        return found if names == spelled else walk_nodes(self.tree)

    def re_exported(self, scope: int | None, bound: str) -> bool:
        return scope is None and bound in self.exported


_SETTING_STATEMENTS = frozenset({ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Expr})
# the fields that hold statements (`ExceptHandler.body`, `match_case.body` below a `Try` / `Match`)
_STATEMENT_HOLDERS = (ast.stmt, ast.excepthandler, ast.match_case)


def _statement_children(node: ast.AST) -> list[ast.AST]:
    """`ast.iter_child_nodes(node)`'s statements, handlers and match cases, in its order."""
    out: list[ast.AST] = []
    for _name, value in ast.iter_fields(node):
        if value.__class__ is list:
            out.extend(item for item in value if isinstance(item, _STATEMENT_HOLDERS))
    return out


def _strings(node: ast.AST) -> list[str]:
    if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
        return [e.value for e in node.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)]
    return [node.value] if isinstance(node, ast.Constant) and isinstance(node.value, str) else []
