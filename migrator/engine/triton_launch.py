"""Triton launch sites and autotune configs on Ascend (the `kernels` family, KERN010-KERN012).

* `num_warps` / `num_stages` in `triton.Config(...)` or a launch: Ascend cores have no warps.
* A launch grid `kernel[grid](...)` whose dimension is known (literals, `triton.cdiv` of constants,
  `meta["BLOCK"]` from the launch's own keywords) and exceeds the core-dimension limit (65535).
* A launch whose literal `tl.constexpr` block sizes give an on-chip footprint over the unified
  buffer: tile elements x live tiles (loads, accumulators, the stored result) x 4 bytes (fp32, the
  widest common case), against the UB size (192 KB on A2). Not the 96 KB bound for double
  buffering: the compiler drops the extra buffer when space is short (performance guidelines), and
  the migration guide's own zeros_like fix runs at BLOCK_SIZE=32768 (128 KB of offsets). Kernels with `tl.dot` are left out: cube operands live in L1/L0, not the UB.
"""

from __future__ import annotations

import ast
import math
from collections.abc import Sequence
from typing import Any, Protocol

from migrator.catalogue.coverage import triton_ascend
from migrator.engine import triton_persistent
from migrator.engine.fusion_checker import Emit, Names, src
from migrator.engine.node_walk import walk_nodes


class DeclinableEmit(Protocol):
    """An `Emit` that also takes the reason a fixable rule's site stays manual (`manual_reason=`)."""

    def __call__(self, impl: str, node: ast.AST, symbol: str, replacement: str, /, **extra: Any) -> None: ...

CONFIG = {"triton.Config"}
CDIV = {"triton.cdiv", "triton.language.cdiv"}
TUNING = ("num_warps", "num_stages")


def constants(scope: ast.AST, nodes: Sequence[ast.AST] | None = None) -> dict[str, int]:
    """Names assigned exactly once in the scope's own statements to an int expression of earlier ones
    (`nodes`: `ast.walk(scope)`'s, when already listed)."""
    values: dict[str, int] = {}
    counts: dict[str, int] = {}
    for stmt in walk_nodes(scope) if nodes is None else nodes:  # counts: the order does not matter
        if isinstance(stmt, ast.Assign):
            for t in stmt.targets:
                if isinstance(t, ast.Name):
                    counts[t.id] = counts.get(t.id, 0) + 1
    for stmt in getattr(scope, "body", []):
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name):
            name = stmt.targets[0].id
            value = Evaluator(values, {}, lambda n: set()).value(stmt.value)
            if value is not None and counts.get(name) == 1:
                values[name] = value
    return values


class Evaluator:
    """Integer value of a grid expression when every part of it is known."""

    def __init__(self, env: dict[str, int], meta: dict[str, int], names: Names) -> None:
        self.env, self.meta, self.names = env, meta, names

    def value(self, node: ast.AST) -> int | None:
        if isinstance(node, ast.Constant) and type(node.value) is int:
            return node.value
        if isinstance(node, ast.Name):
            return self.env.get(node.id)
        if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant):
            return self.meta.get(str(node.slice.value))  # meta["BLOCK_SIZE"]
        if isinstance(node, ast.Call) and self.names(node.func) & CDIV and len(node.args) == 2:
            a, b = (self.value(x) for x in node.args)
            return -(-a // b) if a is not None and b else None
        if isinstance(node, ast.BinOp):
            a, b = self.value(node.left), self.value(node.right)
            if a is None or b is None:
                return None
            ops = {ast.Add: lambda: a + b, ast.Sub: lambda: a - b, ast.Mult: lambda: a * b,
                   ast.Pow: lambda: a**b if 0 <= b < 64 else None,
                   ast.FloorDiv: lambda: a // b if b else None}
            return ops[type(node.op)]() if type(node.op) in ops else None
        return None


def _grid_dims(grid: ast.expr, scope_env: dict[str, ast.expr]) -> list[ast.expr]:
    if isinstance(grid, ast.Name) and grid.id in scope_env:
        grid = scope_env[grid.id]
    if isinstance(grid, ast.Lambda):
        grid = grid.body
    if isinstance(grid, ast.Tuple | ast.List):
        return list(grid.elts)
    return [grid]


def _launch_values(call: ast.Call, kernel: ast.FunctionDef, env: dict[str, int]) -> dict[str, int]:
    """The kernel parameters this launch gives a known int (keywords, positionals, defaults)."""
    ev = Evaluator(env, {}, lambda n: set())
    params = [a.arg for a in kernel.args.args]
    values: dict[str, int] = {}
    for name, default in zip(params[len(params) - len(kernel.args.defaults):], kernel.args.defaults):
        if (v := ev.value(default)) is not None:
            values[name] = v
    for name, arg in zip(params, call.args):
        if (v := ev.value(arg)) is not None:
            values[name] = v
    for kw in call.keywords:
        if kw.arg and (v := ev.value(kw.value)) is not None:
            values[kw.arg] = v
    return values


def _constexprs(kernel: ast.FunctionDef, names: Names) -> list[str]:
    return [a.arg for a in kernel.args.args
            if a.annotation is not None and "triton.language.constexpr" in names(a.annotation)]


def footprint(kernel: ast.FunctionDef, blocks: dict[str, int], names: Names) -> tuple[int, int, int] | None:
    """(tile elements, live tiles, bytes) from the kernel's `tl.arange` extents and tile shapes."""
    extents: list[int] = []
    live = 0
    uses_dot = False
    ev = Evaluator(blocks, {}, names)
    for node in ast.walk(kernel):
        if not isinstance(node, ast.Call):
            continue
        called = {n.rsplit(".", 1)[-1] for n in names(node.func) if n.startswith("triton.language.")}
        uses_dot |= "dot" in called
        if "arange" in called and len(node.args) == 2:
            start, stop = ev.value(node.args[0]), ev.value(node.args[1])
            if start is not None and stop is not None:
                extents.append(stop - start)
        if called & {"zeros", "full"} and node.args and isinstance(node.args[0], ast.Tuple | ast.List):
            dims = [ev.value(d) for d in node.args[0].elts]
            if all(d is not None for d in dims):
                extents.append(math.prod(d for d in dims if d is not None))
        live += bool(called & {"load", "zeros", "full"})
    if uses_dot or not extents:
        return None
    two_d = any(isinstance(n, ast.Subscript) and isinstance(n.slice, ast.Tuple)
                and any(isinstance(e, ast.Constant) and e.value is None for e in n.slice.elts)
                for n in ast.walk(kernel))
    top = sorted(set(extents), reverse=True)
    tile = max(top[0], top[0] * top[1] if two_d and len(top) > 1 else 0)
    live += 1  # the result being stored
    return tile, live, tile * live * 4


def check_launches(tree: ast.AST, kernels: dict[str, ast.FunctionDef], names: Names, emit: DeclinableEmit,
                   nodes: Sequence[ast.AST] | None = None) -> None:
    """Grids over the core limit and blocks over the unified buffer (`nodes`: `ast.walk(tree)`'s, if listed)."""
    if not kernels:  # a launch is a call of one of the module's own kernels
        return
    core_max, core_src = triton_ascend.limit("core_dim_max")
    ub, ub_src = triton_ascend.limit("ub_bytes")
    nodes = list(ast.walk(tree)) if nodes is None else nodes
    module_env = constants(tree, nodes)
    # innermost scope first, so a launch is judged with the constants of the function it sits in
    scopes = [n for n in nodes if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)][::-1] + [tree]
    done: set[int] = set()
    for scope in scopes:
        env = {**module_env, **constants(scope)} if scope is not tree else module_env
        assigned = {s.targets[0].id: s.value for s in getattr(scope, "body", [])
                    if isinstance(s, ast.Assign) and len(s.targets) == 1 and isinstance(s.targets[0], ast.Name)}
        for stmt in getattr(scope, "body", []):
            for node in walk_nodes(stmt):
                if id(node) in done or not (isinstance(node, ast.Call) and isinstance(node.func, ast.Subscript)
                        and isinstance(node.func.value, ast.Name) and node.func.value.id in kernels):
                    continue
                done.add(id(node))
                kernel = kernels[node.func.value.id]
                values = _launch_values(node, kernel, env)
                ev = Evaluator(env, values, names)
                for axis, dim in enumerate(_grid_dims(node.func.slice, assigned)):
                    n = ev.value(dim)
                    if n is not None and n > core_max:
                        persistent = triton_persistent.plan(tree, kernels, kernel.name, names)  # the fixer's question
                        emit("triton-grid-limit", node.func, kernel.name,
                             f"grid axis {axis} `{src(dim)}` = {n} programs > {core_max} ({core_src}); make the "
                             "kernel loop over blocks (persistent) with the grid set from the core count",
                             manual_reason=persistent if isinstance(persistent, str) else None)
                blocks = {k: v for k, v in values.items() if k in _constexprs(kernel, names)}
                est = footprint(kernel, {**env, **blocks}, names) if blocks else None
                if est is not None and est[2] > ub:
                    tile, live, size = est
                    shown = ", ".join(f"{k}={v}" for k, v in sorted(blocks.items()))
                    emit("triton-ub-overflow", node, kernel.name,
                         f"{shown}: about {live} live tiles x {tile} elements x 4 bytes = {size // 1024} KB > "
                         f"{ub // 1024} KB ({ub_src}); split the block with an inner loop over a sub-block")


def check_configs(tree: ast.AST, names: Names, emit: Emit, nodes: Sequence[ast.AST] | None = None) -> None:
    """`num_warps=` / `num_stages=` in `triton.Config(...)` and in launches of any kernel (`nodes`: as above)."""
    for node in ast.walk(tree) if nodes is None else nodes:
        if not isinstance(node, ast.Call):
            continue
        is_config = bool(names(node.func) & CONFIG)
        if is_config or isinstance(node.func, ast.Subscript):
            for kw in node.keywords:
                if kw.arg in TUNING:
                    where = "triton.Config" if is_config else "the launch"
                    emit("triton-tuning-knob", kw.value, f"{kw.arg}={src(kw.value)}",
                         f"in {where}: Ascend has no warps or software pipelining stages; drop it")
