"""Whether a kernel whose grid passes the core-dimension limit (KERN019) can be made persistent, and how.

The rewrite (`migrator/rules/kernels/triton_grid_limit.py`) wraps the body in
`for pid in range(tl.program_id(0), N_PROGRAMS, tl.num_programs(0))` (the loop of Triton-Ascend's
programming guide) and launches the core count of programs, passing the original grid as `N_PROGRAMS`.
It is equivalent only where a program's work depends on nothing but its `pid`, so it is planned for
simple 1-D kernels and declined with a reason otherwise. Scan and fix both ask `plan` on the module's
`ast` tree, so a site is fixable in the scan exactly when the fixer rewrites it.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

from migrator.engine.fusion_checker import Names, src

PROGRAMS_PARAM = "N_PROGRAMS"
PROGRAM_ID = "triton.language.program_id"
NUM_PROGRAMS = "triton.language.num_programs"
LOCKS = ("triton.language.atomic_cas", "triton.language.atomic_xchg")
# calls a grid expression may make: evaluated twice (grid and N_PROGRAMS), so they must have no effect
PURE_CALLS = {"triton.cdiv", "triton.language.cdiv", "triton.next_power_of_2", "len", "min", "max", "int", "math.ceil"}
PURE_METHODS = {"numel", "size", "stride", "dim"}


@dataclass(frozen=True)
class Launch:
    line: int  # the launch call `kernel[grid](...)`, 1-based
    column: int  # 0-based
    programs: str  # the grid's one dimension, `meta[...]` replaced by the launch's keywords


@dataclass(frozen=True)
class Plan:
    kernel: str
    pid: str  # the name the body binds `tl.program_id(0)` to
    uses_dot: bool  # cube kernels run one program per AI core, vector kernels one per vector core
    launches: tuple[Launch, ...]


def plan(tree: ast.AST, kernels: dict[str, ast.FunctionDef], name: str, names: Names) -> Plan | str:
    """The persistent rewrite of kernel `name` and its launches in this module, or why there is none."""
    kernel = kernels.get(name)
    if kernel is None:
        return f"`{name}` is not a `@triton.jit` function of this module"
    why = _kernel_reason(kernel, kernels, names)
    if why is not None:
        return why
    pid = _pid_statement(kernel, names)
    assert pid is not None  # _kernel_reason checked it
    launches: list[Launch] = []
    uses = 0
    for scope, node in _launches_with_scope(tree, name):
        uses += 1
        launch = _launch(node, scope, names)
        if isinstance(launch, str):
            return launch
        launches.append(launch)
    named = sum(1 for n in ast.walk(tree) if isinstance(n, ast.Name) and n.id == name)
    if named != uses:
        return f"`{name}` is used other than as `{name}[grid](...)` in this module (passed on, or its `.run`)"
    uses_dot = any(n for n in ast.walk(kernel) if isinstance(n, ast.Call) and "triton.language.dot" in names(n.func))
    return Plan(name, _target(pid), uses_dot, tuple(sorted(launches, key=lambda x: (x.line, x.column))))


def _target(assign: ast.Assign) -> str:
    target = assign.targets[0]
    assert isinstance(target, ast.Name)  # _pid_statement took only such assignments
    return target.id


def _pid_statement(kernel: ast.FunctionDef, names: Names) -> ast.Assign | None:
    for stmt in kernel.body:
        if (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name)
                and isinstance(stmt.value, ast.Call) and PROGRAM_ID in names(stmt.value.func)):
            return stmt
    return None


def _axis_zero(call: ast.Call) -> bool:
    args = [*call.args, *(k.value for k in call.keywords if k.arg == "axis")]
    return len(args) == 1 and isinstance(args[0], ast.Constant) and args[0].value == 0 and len(call.keywords) <= 1


def _kernel_reason(kernel: ast.FunctionDef, kernels: dict[str, ast.FunctionDef], names: Names) -> str | None:
    a = kernel.args
    if a.vararg or a.kwarg or a.kwonlyargs or a.posonlyargs or a.defaults:
        return "the kernel has parameters with defaults, `*args` or keyword-only ones: add the program count by hand"
    if any(p.arg == PROGRAMS_PARAM for p in a.args):
        return f"the kernel already has a `{PROGRAMS_PARAM}` parameter"
    calls = [n for n in ast.walk(kernel) if isinstance(n, ast.Call)]
    reads = [c for c in calls if PROGRAM_ID in names(c.func)]
    pid = _pid_statement(kernel, names)
    if len(reads) != 1 or pid is None or pid.value is not reads[0] or not _axis_zero(reads[0]):
        return ("the persistent loop is proven only for a 1-D kernel that reads `pid = tl.program_id(0)` once at the "
                "top of its body; make this one persistent by hand")
    pid_name = _target(pid)
    if any(isinstance(n, ast.Name) and n.id == pid_name and isinstance(n.ctx, ast.Store) and n is not pid.targets[0]
           for n in ast.walk(kernel)):
        return f"the body assigns `{pid_name}` again"
    if any(NUM_PROGRAMS in names(c.func) for c in calls):
        return "the body reads `tl.num_programs`, which the persistent grid changes"
    if any(isinstance(n, ast.Return) for n in ast.walk(kernel)):
        return "a `return` in the body would end the loop over the blocks after it: use `if` around the work instead"
    if any(names(c.func) & set(LOCKS) for c in calls):
        return "atomic_cas/atomic_xchg (a lock between programs) may wait on a block the same core runs later"
    for c in calls:
        if isinstance(c.func, ast.Name) and c.func.id in kernels and c.func.id != kernel.name:
            helper = kernels[c.func.id]
            if any(isinstance(n, ast.Call) and names(n.func) & {PROGRAM_ID, NUM_PROGRAMS} for n in ast.walk(helper)):
                return f"the helper `{c.func.id}` reads the program id itself"
    return None


def _launches_with_scope(tree: ast.AST, name: str) -> list[tuple[ast.AST, ast.Call]]:
    """Each `name[grid](...)` call with the innermost function (or the module) holding it."""
    found: list[tuple[ast.AST, ast.Call]] = []

    def visit(scope: ast.AST, node: ast.AST) -> None:
        for child in ast.iter_child_nodes(node):
            if (isinstance(child, ast.Call) and isinstance(child.func, ast.Subscript)
                    and isinstance(child.func.value, ast.Name) and child.func.value.id == name):
                found.append((scope, child))
            visit(child if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef) else scope, child)

    visit(tree, tree)
    return found


def _assigned_once(scope: ast.AST, name: str) -> ast.expr | None:
    values = [s.value for s in getattr(scope, "body", []) if isinstance(s, ast.Assign) and len(s.targets) == 1
              and isinstance(s.targets[0], ast.Name) and s.targets[0].id == name]
    stores = sum(1 for n in ast.walk(scope) if isinstance(n, ast.Name) and n.id == name and isinstance(n.ctx, ast.Store))
    return values[0] if len(values) == 1 and stores == 1 else None


def _launch(call: ast.Call, scope: ast.AST, names: Names) -> Launch | str:
    grid: ast.expr | None = call.func.slice  # type: ignore[attr-defined]
    if isinstance(grid, ast.Name):
        grid = _assigned_once(scope, grid.id)
    meta = None
    if isinstance(grid, ast.Lambda):
        if len(grid.args.args) != 1:
            return "the launch's grid is not a one-argument lambda"
        meta, grid = grid.args.args[0].arg, grid.body
    if not isinstance(grid, ast.Tuple | ast.List) or len(grid.elts) != 1:
        return f"line {call.lineno}: the grid is not a 1-D tuple (or a lambda or name giving one) the fix can read"
    if any(isinstance(a, ast.Starred) for a in call.args) or any(k.arg is None for k in call.keywords):
        return f"line {call.lineno}: the launch passes *args/**kwargs"
    if any(k.arg == PROGRAMS_PARAM for k in call.keywords):
        return f"line {call.lineno}: the launch already passes `{PROGRAMS_PARAM}`"
    given = {k.arg: k.value for k in call.keywords if k.arg}
    dim = grid.elts[0]
    why = _dimension_reason(dim, meta, given, names)
    if why is not None:
        return f"line {call.lineno}: {why}"
    return Launch(call.lineno, call.col_offset, _substitute(dim, meta, given) if meta is not None else src(dim))


def _dimension_reason(dim: ast.expr, meta: str | None, given: dict[str, ast.expr], names: Names) -> str | None:
    """Why the grid's dimension cannot be computed at the launch (twice: grid and `N_PROGRAMS`), or None."""
    for node in ast.walk(dim):
        if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name) and node.value.id == meta:
            key = node.slice.value if isinstance(node.slice, ast.Constant) else None
            if not isinstance(key, str) or key not in given:
                return (f"the grid reads `{src(node)}`, which the launch does not pass (autotuned?): "
                        "the number of programs is not known at the launch")
        elif isinstance(node, ast.Name) and node.id == meta:
            if not any(isinstance(p, ast.Subscript) and p.value is node for p in ast.walk(dim)):
                return f"the grid passes `{meta}` on whole"
        elif isinstance(node, ast.Call):
            method = node.func.attr if isinstance(node.func, ast.Attribute) else ""
            bare = node.func.id if isinstance(node.func, ast.Name) else ""
            if not (names(node.func) & PURE_CALLS or bare in PURE_CALLS or method in PURE_METHODS):
                return f"the grid calls `{src(node.func)}`, which the fix would call twice"
    return None


def _substitute(dim: ast.expr, meta: str, given: dict[str, ast.expr]) -> str:
    class Meta(ast.NodeTransformer):
        def visit_Subscript(self, node: ast.Subscript) -> ast.AST:
            if isinstance(node.value, ast.Name) and node.value.id == meta and isinstance(node.slice, ast.Constant):
                return given[str(node.slice.value)]  # unparse adds the parentheses precedence needs
            return self.generic_visit(node)

    return ast.unparse(Meta().visit(ast.parse(ast.unparse(dim), mode="eval")))
