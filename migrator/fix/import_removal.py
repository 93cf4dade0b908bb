"""Removing the imports of fixed CUDA-only libraries whose last use the fix rewrote, and counting the
names a module uses (for that and for the imports `fix/imports.py` adds)."""

from __future__ import annotations

import ast
import itertools
import re
from collections.abc import Callable, Iterable, Sequence
from typing import TypeVar

import libcst as cst

AnyImport = TypeVar("AnyImport", cst.Import, cst.ImportFrom)
Node = TypeVar("Node", bound=cst.CSTNode)


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


class _ScopedNameCounter(_NameCounter):
    """Name uses per function too (source order, as `engine/import_scopes.ImportScopes` numbers them; each
    function counts its whole subtree) and the names each function declares global or nonlocal."""

    def __init__(self) -> None:
        super().__init__()
        self.functions: list[dict[str, int]] = []
        self.declared: list[set[str]] = []
        self.names: list[str] = []
        self.stack: list[int] = []

    def on_visit(self, node: cst.CSTNode) -> bool:
        for name in getattr(node, "functions", ()):  # a statement held as its source text (`fix/stand_ins.py`)
            self._function(name)
        return super().on_visit(node)

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        self.stack.append(len(self.functions))
        self._function(node.name.value)

    def _function(self, name: str) -> None:
        self.functions.append({})
        self.declared.append(set())
        self.names.append(name)

    def leave_FunctionDef(self, original_node: cst.FunctionDef) -> None:
        self.stack.pop()

    def visit_Name(self, node: cst.Name) -> None:
        super().visit_Name(node)
        for index in self.stack:
            counts = self.functions[index]
            counts[node.value] = counts.get(node.value, 0) + 1

    def visit_Global(self, node: cst.Global) -> None:
        if self.stack:
            self.declared[self.stack[-1]].update(item.name.value for item in node.names)

    visit_Nonlocal = visit_Global  # type: ignore[assignment]  # same shape

    def count(self, scope: int | None, name: str) -> int:
        return (self.counts if scope is None else self.functions[scope]).get(name, 0)


def scoped_counts(module: cst.Module) -> _ScopedNameCounter:
    counter = _ScopedNameCounter()
    module.visit(counter)
    return counter


class _ImportRemover(cst.CSTTransformer):
    """Drops the unused aliases; a statement left empty is dropped by its block, which hands the comments
    above it to the next statement (or keeps them at the block's end), so no comment is lost."""

    def __init__(self, unused: Callable[[int | None, str], bool], module: cst.Module | None = None) -> None:
        self.unused = unused  # (innermost function or None, bound name) -> remove this alias
        self.functions = 0
        self.stack: list[int] = []
        # id of each statement of `module` that holds no import -> the functions it defines: not walked
        # (kept as the very node, so that its text is not rendered again), its functions only counted
        self.importless: dict[int, int] = {}
        if module is not None:
            _count_functions(module.body, self.importless)
        self.edits = 0  # import statements changed so far
        self.edits_at: list[int] = []  # `edits` when each enclosing statement line was entered
        # the stand-ins of emptied statements by id (libcst would drop an empty one silently); held here so
        # that no later node can get the id of one that was dropped
        self.emptied: dict[int, cst.SimpleStatementLine] = {}

    def _emptied(self, lines: Sequence[cst.EmptyLine]) -> cst.SimpleStatementLine:
        stand_in = cst.SimpleStatementLine([cst.Pass()], leading_lines=lines)
        self.emptied[id(stand_in)] = stand_in
        return stand_in

    def on_visit(self, node: cst.CSTNode) -> bool:
        functions = self.importless.get(id(node)) if isinstance(node, cst.BaseStatement) else None
        if functions is not None:
            self.functions += functions  # numbered as if walked: the scopes after it keep their numbers
            return False
        return super().on_visit(node)

    def on_leave(self, original: Node, updated: Node) -> Node | cst.RemovalSentinel | cst.FlattenSentinel[Node]:
        if isinstance(original, cst.BaseStatement) and id(original) in self.importless:
            return updated
        return super().on_leave(original, updated)

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        self.stack.append(self.functions)
        self.functions += 1

    def visit_SimpleStatementLine(self, node: cst.SimpleStatementLine) -> None:
        self.edits_at.append(self.edits)

    def leave_FunctionDef(self, original: cst.FunctionDef, updated: cst.FunctionDef) -> cst.FunctionDef:
        self.stack.pop()
        return updated

    def _keep(self, alias: cst.ImportAlias) -> bool:
        return not self.unused(self.stack[-1] if self.stack else None, bound_name(alias))

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
        self.edits += 1
        if not names:
            return cst.RemoveFromParent()
        names[-1] = names[-1].with_changes(comma=_last_comma(names[-1].comma, updated.names[-1].comma))
        return updated.with_changes(names=names)

    def leave_SimpleStatementLine(
        self, original: cst.SimpleStatementLine, updated: cst.SimpleStatementLine
    ) -> cst.SimpleStatementLine:
        if self.edits_at.pop() == self.edits:
            return updated  # no import changed in it: no comment to move
        # a removed import's comments (`import pynvml  # stats`, or one inside its brackets) go above the line
        kept = {id(c) for c in comments_in(updated.with_changes(trailing_whitespace=cst.TrailingWhitespace())
                                         if not updated.body else updated)}
        lost = [cst.EmptyLine(comment=c) for c in comments_in(original) if id(c) not in kept]
        if not updated.body:
            return self._emptied([*updated.leading_lines, *lost])
        return updated.with_changes(leading_lines=[*updated.leading_lines, *lost]) if lost else updated

    def leave_IndentedBlock(self, original: cst.IndentedBlock, updated: cst.IndentedBlock) -> cst.IndentedBlock:
        body, comments = _without_empty(updated.body, self.emptied, block=True)
        if not body:  # a try: body that held only the removed import
            return updated.with_changes(body=[cst.SimpleStatementLine([cst.Pass()], leading_lines=comments)])
        return updated.with_changes(body=body, footer=[*comments, *updated.footer])

    def leave_Module(self, original: cst.Module, updated: cst.Module) -> cst.Module:
        body, comments = _without_empty(updated.body, self.emptied)
        return updated.with_changes(body=body, footer=[*comments, *updated.footer])

    def leave_Try(self, original: cst.Try, updated: cst.Try) -> cst.Try | cst.SimpleStatementLine:
        """`try: <removed imports> except ImportError: ...` has nothing left to guard: drop it (its comments
        and those of its body go on, as an emptied statement's do)."""
        body = updated.body.body
        only_pass = all(
            isinstance(s, cst.SimpleStatementLine) and all(isinstance(x, cst.Pass) for x in s.body) for s in body
        )
        if only_pass and not original.body.body == updated.body.body and _guards_imports(updated):
            lines = [*updated.leading_lines, *(line for s in body for line in getattr(s, "leading_lines", ()))]
            held = {id(line.comment) for line in lines}
            if any(id(c) not in held for c in comments_in(updated)):  # `try:  # ...`, the handlers': all, in order
                own = {id(line.comment) for line in updated.leading_lines}
                lines = [*updated.leading_lines, *(cst.EmptyLine(comment=c) for c in comments_in(updated) if id(c) not in own)]
            return self._emptied(lines)
        return updated


def _count_functions(body: Sequence[cst.CSTNode], importless: dict[int, int]) -> tuple[bool, int]:
    """(whether the statements of `body` hold an import, how many functions they define), each statement
    without an import entered in `importless` with its count; statements only, never expressions (no import
    and no `def` is found inside one)."""
    holds, functions = False, 0
    for stmt in body:
        if isinstance(stmt, cst.SimpleStatementLine):  # held as its source text: its functions (`fix/stand_ins.py`)
            own = any(isinstance(small, (cst.Import, cst.ImportFrom)) for small in stmt.body), len(getattr(stmt, "functions", ()))
        elif isinstance(stmt, cst.BaseSmallStatement):  # in a one-line block (`try: import x`)
            own = isinstance(stmt, (cst.Import, cst.ImportFrom)), 0
        else:
            own = _count_functions(_blocks_of(stmt), importless)
            own = own[0], own[1] + isinstance(stmt, cst.FunctionDef)
        if not own[0]:
            importless[id(stmt)] = own[1]
        holds, functions = holds or own[0], functions + own[1]
    return holds, functions


def _blocks_of(stmt: cst.CSTNode) -> list[cst.CSTNode]:
    """The statements of a compound statement's blocks (a one-line block's small statements included)."""
    parts: list[cst.CSTNode] = []
    suites = [getattr(stmt, "body", None), getattr(stmt, "finalbody", None), *getattr(stmt, "handlers", ()),
              *getattr(stmt, "cases", ())]
    orelse = getattr(stmt, "orelse", None)
    if isinstance(orelse, cst.If):
        parts.append(orelse)  # an elif: a statement of its own
    else:
        suites.append(orelse)
    for suite in suites:
        while suite is not None and not isinstance(suite, cst.BaseSuite):  # else / except / finally / case parts
            suite = getattr(suite, "body", None)
        if isinstance(suite, cst.BaseSuite):
            parts.extend(suite.body)
    return parts


def _last_comma(kept: cst.Comma | cst.MaybeSentinel, last: cst.Comma | cst.MaybeSentinel) -> cst.Comma | cst.MaybeSentinel:
    """The new last name's comma: none (as ever), but one holding a comment (`from x import (\n    a,  # why\n)`)
    stays, with the layout before `)` that the old last name's comma held."""
    pw = cst.ParenthesizedWhitespace
    if not (isinstance(kept, cst.Comma) and isinstance(last, cst.Comma) and comments_in(kept)
            and isinstance(kept.whitespace_after, pw) and isinstance(last.whitespace_after, pw)):
        return cst.MaybeSentinel.DEFAULT
    return kept.with_changes(whitespace_after=kept.whitespace_after.with_changes(
        indent=last.whitespace_after.indent, last_line=last.whitespace_after.last_line))


def comments_in(node: cst.CSTNode) -> list[cst.Comment]:
    """Every comment inside `node`, in source order."""
    found: list[cst.Comment] = []

    class Collect(cst.CSTVisitor):
        def visit_Comment(self, comment: cst.Comment) -> None:
            found.append(comment)

    node.visit(Collect())
    return found


def _has_comment(lines: Sequence[cst.EmptyLine]) -> bool:
    return any(line.comment is not None for line in lines)


def _without_empty(body: Sequence[cst.BaseStatement], emptied: dict[int, cst.SimpleStatementLine],
                   block: bool = False) -> tuple[list[cst.BaseStatement], list[cst.EmptyLine]]:
    """The statements left once emptied ones are dropped; the comment lines above an emptied statement move
    to the next one, and those with no next statement are returned for the block's footer. In a `block`
    (not the module) whose first statements were dropped, the blank lines that followed them go too: a
    body does not open with an empty line."""
    kept: list[cst.BaseStatement] = []
    carried: list[cst.EmptyLine] = []
    dropped_first = False
    for statement in body:
        if emptied.get(id(statement)) is statement:
            if _has_comment(statement.leading_lines):
                carried.extend(statement.leading_lines)
            dropped_first = dropped_first or not kept
            continue
        if carried or (block and dropped_first and not kept):
            lines = [*carried, *getattr(statement, "leading_lines", ())]
            if block and dropped_first and not kept:
                lines = list(itertools.dropwhile(lambda line: line.comment is None, lines))
            statement = statement.with_changes(leading_lines=lines)
            carried = []
        kept.append(statement)
    return kept, carried


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


def remove_unused_imports(before: cst.Module, after: cst.Module, candidates: set[str],
                          kept: Callable[[int | None, str], bool] | None = None) -> tuple[cst.Module, set[tuple[int | None, str]]]:
    """Drop imports of fixed CUDA-only libraries whose bound name is used before but not after, in the scope
    the import binds it in (a function's local, else the module: `engine/import_scopes.py`); `kept(scope,
    name)`: an import that stays whatever its uses (a re-export). Returns the (scope, name) pairs removed."""
    if not candidates:
        return after, set()
    used_before, used_after = scoped_counts(before), scoped_counts(after)
    by_function = used_before.names == used_after.names  # the same functions: their counts compare

    def unused(scope: int | None, name: str) -> bool:
        if name not in candidates:
            return False
        if scope is not None and (not by_function or name in used_before.declared[scope]):
            scope = None
        if (kept is not None and kept(scope, name)) or used_before.count(scope, name) == 0 or used_after.count(scope, name):
            return False
        removed.add((scope, name))
        return True

    removed: set[tuple[int | None, str]] = set()
    new = after.visit(_ImportRemover(unused, after))
    return (new if removed else after), removed


def _blocks(node: ast.stmt) -> Iterable[list[ast.stmt]]:
    for name in ("body", "orelse", "finalbody"):
        block = getattr(node, name, None)
        if isinstance(block, list):
            yield block
    for inner in (*getattr(node, "handlers", ()), *getattr(node, "cases", ())):
        yield inner.body


def _statement_span(body: list[ast.stmt], line: int) -> tuple[int, int] | None:
    """The lines of the innermost statement holding `line` (a compound statement whole when `line` is in
    its header: decorators, `with` items, `if` tests)."""
    for node in body:
        first = min([node.lineno, *(d.lineno for d in getattr(node, "decorator_list", ()))])
        last = node.end_lineno or node.lineno
        if first <= line <= last:
            for block in _blocks(node):
                inner = _statement_span(block, line)
                if inner is not None:
                    return inner
            return first, last
    return None


def _held_spans(tree: ast.Module, spans: Iterable[tuple[int, int]]) -> set[tuple[int, int]]:
    """(first, last) line of each statement holding a rewrite (`spans`: first and last line of each)."""
    held: set[tuple[int, int]] = set()
    for first, last in spans:
        start, _ = _statement_span(tree.body, first) or (first, first)
        _, end = _statement_span(tree.body, last) or (last, last)
        held.add((min(start, first), max(end, last)))
    return held


def rewritten_names(tree: ast.Module, lines: Sequence[str], spans: Iterable[tuple[int, int]],
                    candidates: set[str]) -> set[str]:
    """The candidates spelled in a statement holding a rewrite (`spans`: first and last line of each). A
    node's fix replaces that node only, so a name found in none of those statements has as many uses
    after the fix as before, in every function: its import cannot have become unused."""
    if not candidates:
        return set()
    held = _held_spans(tree, spans)
    text = "\n".join("\n".join(lines[start - 1:end]) for start, end in sorted(held))
    return {name for name in candidates if re.search(rf"(?<![\w.]){re.escape(name)}\b", text)}


Scope = ast.FunctionDef | ast.AsyncFunctionDef | None  # the innermost function, or the module


def _binding_scopes(body: list[ast.stmt], names: set[str], scope: Scope,
                    found: dict[str, list[Scope]]) -> None:
    """Each name of `names` an import binds, with the innermost function of each such import (as the
    removal judges an import: `_ImportRemover`)."""
    for node in body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            for alias in node.names:
                bound = alias.asname or alias.name.split(".")[0]
                if bound in names:
                    found.setdefault(bound, []).append(scope)
        inner = node if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) else scope
        for block in _blocks(node):
            _binding_scopes(block, names, inner, found)


def _used_outside(scope: ast.AST, name: str, touched: set[int]) -> bool:
    """Whether `scope` reads or binds `name` as a plain name on a line no rewrite touched. Not counted inside
    f-strings, whose inner line numbers Python 3.11 can misplace in a multi-line string."""
    stack = [scope]
    while stack:
        node = stack.pop()
        if isinstance(node, ast.Name) and node.id == name and node.lineno not in touched:
            return True
        if not isinstance(node, ast.JoinedStr):
            stack.extend(ast.iter_child_nodes(node))
    return False


def kept_by_untouched_uses(tree: ast.Module, spans: Iterable[tuple[int, int]], names: set[str]) -> set[str]:
    """The names whose every import keeps a use in its scope on a line outside the statements holding a
    rewrite (`spans`): such a use is there after the fix as before (a fix replaces its node only), so the
    removal would keep the import, and its three libcst walks are not needed for that name. A name bound
    by no import found here is not claimed."""
    if not names:
        return set()
    touched = {line for start, end in _held_spans(tree, spans) for line in range(start, end + 1)}
    scopes: dict[str, list[Scope]] = {}
    _binding_scopes(tree.body, names, None, scopes)
    return {name for name, where in scopes.items()
            if all(_used_outside(tree if scope is None else scope, name, touched) for scope in where)}
