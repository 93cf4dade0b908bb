"""The libcst side of the persistent rewrite (KERN019), following a `triton_persistent.Plan`."""

from __future__ import annotations

from typing import cast

import libcst as cst

from migrator.catalogue.site import Declined
from migrator.engine.triton_persistent import NUM_PROGRAMS, PROGRAM_ID, PROGRAMS_PARAM, Plan
from migrator.fix.context import FixContext
from migrator.fix.module_fixes import resolve, with_trailing


def _cores(ctx: FixContext, uses_dot: bool) -> cst.BaseExpression:
    """The physical cores a program runs on: vector cores, or AI cores for `tl.dot` kernels (the guide)."""
    code = cst.Module([]).code_for_node
    driver = code(ctx.expr_for("triton.runtime.driver"))
    current = code(ctx.expr_for("torch.npu.current_device"))
    key = "num_aicore" if uses_dot else "num_vectorcore"
    return cst.parse_expression(f'{driver}.active.utils.get_device_properties({current}())["{key}"]')


def _loop(ctx: FixContext, body: cst.IndentedBlock, plan: Plan) -> cst.IndentedBlock | None:
    statements = list(body.body)
    i = next((j for j, stmt in enumerate(statements) if _reads_program_id(ctx, stmt)), None)
    if i is None:
        return None
    pid_line = cast(cst.SimpleStatementLine, statements[i])
    value = cast(cst.Call, cast(cst.Assign, pid_line.body[0]).value)
    head = statements[:1] if i > 0 and _is_docstring(statements[0]) else []
    rest = [s for j, s in enumerate(statements) if j != i and not (head and j == 0)]
    func = value.func
    programs = (func.with_changes(attr=cst.Name("num_programs")) if isinstance(func, cst.Attribute)
                else ctx.expr_for(NUM_PROGRAMS))
    loop = cst.For(
        target=cst.Name(plan.pid),
        iter=cst.Call(func=cst.Name("range"), args=[
            cst.Arg(value), cst.Arg(cst.Name(PROGRAMS_PARAM)), cst.Arg(cst.Call(func=programs, args=value.args))]),
        body=cst.IndentedBlock(body=rest),
        leading_lines=pid_line.leading_lines,
    )
    return body.with_changes(body=[*head, loop])


def _reads_program_id(ctx: FixContext, stmt: cst.BaseStatement) -> bool:
    """`NAME = tl.program_id(...)` (the plan checked there is one, at the top of the body)."""
    if not (isinstance(stmt, cst.SimpleStatementLine) and len(stmt.body) == 1 and isinstance(stmt.body[0], cst.Assign)):
        return False
    value = stmt.body[0].value
    return isinstance(value, cst.Call) and PROGRAM_ID in resolve(ctx, value.func)


def _is_docstring(stmt: cst.BaseStatement) -> bool:
    return (isinstance(stmt, cst.SimpleStatementLine) and len(stmt.body) == 1 and isinstance(stmt.body[0], cst.Expr)
            and isinstance(stmt.body[0].value, cst.SimpleString | cst.ConcatenatedString))


def make_persistent(ctx: FixContext, module: cst.Module, plan: Plan) -> cst.Module | Declined:
    cores = _cores(ctx, plan.uses_dot)
    launches = iter(plan.launches)
    state = {"kernel": False}

    class Rewrite(cst.CSTTransformer):
        def leave_FunctionDef(self, original: cst.FunctionDef, updated: cst.FunctionDef) -> cst.FunctionDef:
            if updated.name.value != plan.kernel or state["kernel"] or not isinstance(updated.body, cst.IndentedBlock):
                return updated
            body = _loop(ctx, updated.body, plan)
            if body is None:
                return updated
            state["kernel"] = True
            params = with_trailing(list(updated.params.params), cst.Param(cst.Name(PROGRAMS_PARAM)))
            return updated.with_changes(body=body, params=updated.params.with_changes(params=params))

        def leave_Call(self, original: cst.Call, updated: cst.Call) -> cst.BaseExpression:
            func = updated.func
            if not (isinstance(func, cst.Subscript) and isinstance(func.value, cst.Name) and func.value.value == plan.kernel):
                return updated
            launch = next(launches, None)
            if launch is None:
                return updated
            programs = cst.parse_expression(launch.programs)
            grid = cst.Tuple([cst.Element(cst.Call(func=cst.Name("min"), args=[cst.Arg(programs), cst.Arg(cores)]))])
            count = cst.Arg(keyword=cst.Name(PROGRAMS_PARAM), value=cst.parse_expression(launch.programs),
                            equal=cst.AssignEqual(cst.SimpleWhitespace(""), cst.SimpleWhitespace("")))
            return updated.with_changes(func=func.with_changes(slice=[cst.SubscriptElement(cst.Index(grid))]),
                                        args=with_trailing(list(updated.args), count))

    new = module.visit(Rewrite())
    if not state["kernel"] or next(launches, None) is not None:
        return Declined(f"the fix did not find `{plan.kernel}` and each of its launches where the scan saw them")
    return new
