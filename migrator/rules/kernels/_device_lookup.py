"""The GPU device lookup of Triton's tutorials, `DEVICE = triton.runtime.driver.active.get_active_torch_device()`
(KERN016), as Triton-Ascend's migration guide ports it: the line goes, with the `assert x.device == DEVICE and
...` checks that were its only uses; a lookup used otherwise becomes the current NPU."""

from __future__ import annotations

from collections.abc import Sequence

import libcst as cst

from migrator.engine.triton_kernels import ACTIVE_DEVICE
from migrator.fix.context import FixContext
from migrator.fix.module_fixes import resolve


def _is_lookup(ctx: FixContext, node: cst.BaseExpression) -> bool:
    return isinstance(node, cst.Call) and ACTIVE_DEVICE in resolve(ctx, node.func)


def _lookup_name(ctx: FixContext, line: cst.SimpleStatementLine) -> str | None:
    if len(line.body) != 1 or not isinstance(line.body[0], cst.Assign):
        return None
    assign = line.body[0]
    if len(assign.targets) == 1 and isinstance(assign.targets[0].target, cst.Name) and _is_lookup(ctx, assign.value):
        return assign.targets[0].target.value
    return None


def _device_check_of(line: cst.SimpleStatementLine) -> str | None:
    """The name every comparison of `assert a.device == NAME and b.device == NAME ...` checks against."""
    if len(line.body) != 1 or not isinstance(line.body[0], cst.Assert) or line.body[0].msg is not None:
        return None
    parts: list[cst.BaseExpression] = []
    todo: list[cst.BaseExpression] = [line.body[0].test]
    while todo:
        node = todo.pop()
        if isinstance(node, cst.BooleanOperation) and isinstance(node.operator, cst.And) and not node.lpar:
            todo += [node.left, node.right]
        else:
            parts.append(node)
    names: set[str] = set()
    for part in parts:
        if not (isinstance(part, cst.Comparison) and len(part.comparisons) == 1
                and isinstance(part.comparisons[0].operator, cst.Equal)):
            return None
        sides = (part.left, part.comparisons[0].comparator)
        device = [s for s in sides if isinstance(s, cst.Attribute) and s.attr.value == "device"]
        other = [s for s in sides if isinstance(s, cst.Name)]
        if len(device) != 1 or len(other) != 1:
            return None
        names.add(other[0].value)
    return names.pop() if len(names) == 1 else None


class _Uses(cst.CSTVisitor):
    def __init__(self, ctx: FixContext) -> None:
        self.ctx = ctx
        self.lookups: dict[str, int] = {}  # name -> assignments of the lookup to it
        self.checks: dict[str, int] = {}  # name -> uses inside device checks
        self.uses: dict[str, int] = {}  # name -> every use

    def visit_SimpleStatementLine(self, node: cst.SimpleStatementLine) -> None:
        if (name := _lookup_name(self.ctx, node)) is not None:
            self.lookups[name] = self.lookups.get(name, 0) + 1
            self.uses[name] = self.uses.get(name, 0) - 1  # its own target is no use
        elif (name := _device_check_of(node)) is not None:
            self.checks[name] = self.checks.get(name, 0) + sum(1 for _ in _names(node, name))

    def visit_Name(self, node: cst.Name) -> None:
        self.uses[node.value] = self.uses.get(node.value, 0) + 1


def _names(node: cst.CSTNode, name: str) -> list[cst.Name]:
    found: list[cst.Name] = []

    class Collect(cst.CSTVisitor):
        def visit_Name(self, n: cst.Name) -> None:
            if n.value == name:
                found.append(n)

    node.visit(Collect())
    return found


def drop_device_lookup(ctx: FixContext, module: cst.Module) -> cst.Module:
    uses = _Uses(ctx)
    module.visit(uses)
    only_checked = {n for n, k in uses.lookups.items() if k == 1 and uses.uses.get(n, 0) == uses.checks.get(n, 0)}

    def gone(stmt: cst.CSTNode) -> bool:
        return isinstance(stmt, cst.SimpleStatementLine) and (
            _lookup_name(ctx, stmt) in only_checked or _device_check_of(stmt) in only_checked)

    def without(originals: Sequence[cst.BaseStatement], body: Sequence[cst.BaseStatement]) -> list[cst.BaseStatement]:
        """The statements that stay; a deleted one's blank lines go to the next (its comments go with it)."""
        kept: list[cst.BaseStatement] = []
        blank: list[cst.EmptyLine] = []
        for original, stmt in zip(originals, body):  # judged as written: the lookup call inside is rewritten
            if gone(original):
                blank += [line for line in stmt.leading_lines if line.comment is None]  # type: ignore[attr-defined]
                continue
            if blank:
                stmt = stmt.with_changes(leading_lines=[*blank, *stmt.leading_lines])  # type: ignore[attr-defined]
                blank = []
            kept.append(stmt)
        return kept or [cst.SimpleStatementLine([cst.Pass()])]

    class Rewrite(cst.CSTTransformer):
        def leave_Module(self, original: cst.Module, updated: cst.Module) -> cst.Module:
            return updated.with_changes(body=without(original.body, updated.body))

        def leave_IndentedBlock(self, original: cst.IndentedBlock, updated: cst.IndentedBlock) -> cst.IndentedBlock:
            return updated.with_changes(body=without(original.body, updated.body))

        def leave_Call(self, original: cst.Call, updated: cst.Call) -> cst.BaseExpression:
            if not _is_lookup(ctx, original):
                return updated
            device = ctx.expr_for("torch.device")  # the current NPU, as the lookup gave the current GPU
            current = ctx.expr_for("torch.npu.current_device")
            return cst.Call(func=device, args=[cst.Arg(cst.SimpleString('"npu"')), cst.Arg(cst.Call(func=current))])

    return module.visit(Rewrite())
