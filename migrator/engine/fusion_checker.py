"""Fusion advice from the AST: hand-written RMSNorm, SwiGLU, NeoX rotary and eager attention that one
fused torch_npu op replaces (the `fusion` family, `rules/fusion.yaml`).

Each detector reads one function body with its local assignments (`v = x.pow(2).mean(-1, keepdim=True)`
then `torch.rsqrt(v + eps)` is one pattern) and reports one finding per site, the fused call with its
argument mapping as the finding's replacement text. Patterns follow the advisor's fusion rules
(msprof-analyze 26.2.0 `timeline_fusion_ops.yaml`), matched on source instead of a profile.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Iterator

from migrator.engine.fast_visitor import child_nodes

Emit = Callable[[str, ast.AST, str, str], None]  # (impl, node, symbol, replacement)
Names = Callable[[ast.AST], set[str]]

SILU = {"torch.nn.functional.silu"}
SOFTMAX = {"torch.softmax", "torch.nn.functional.softmax", "torch.special.softmax"}
MATMUL = {"torch.matmul", "torch.bmm"}
RSQRT = {"torch.rsqrt"}
DROPOUT = {"torch.nn.functional.dropout"}


def functions(tree: ast.AST) -> Iterator[ast.FunctionDef | ast.AsyncFunctionDef]:
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            yield node


_NESTED = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)


def own_nodes(func: ast.AST) -> Iterator[ast.AST]:
    """The function's nodes, without those of nested functions (they are checked on their own), nor
    contexts and operators (a pattern is matched at its `BinOp`, never at an operator alone)."""
    stack = list(child_nodes(func))
    while stack:
        node = stack.pop()
        yield node
        if not isinstance(node, _NESTED):
            stack.extend(child_nodes(node))


# a class's fields that may hold a node, contexts and operators left out (as `fast_visitor.child_nodes` does)
_CHILD_FIELDS: dict[type, tuple[str, ...]] = {}


def own_node_list(func: ast.AST, leaves: bool = True) -> list[ast.AST]:
    """`own_nodes(func)` as a list, in the same order, with each class's fields looked up once and no
    generator per node (a `Body` is built for every function that names a pattern's word); `leaves=False`:
    without names and constants (a pattern is matched at a call, an operation or an assignment)."""
    out: list[ast.AST] = []
    stack: list[ast.AST] = [func]
    fields_of = _CHILD_FIELDS
    skipped: tuple[type, ...] = () if leaves else (ast.Name, ast.Constant)
    while stack:
        node = stack.pop()
        if node is not func:
            out.append(node)
            if isinstance(node, _NESTED):
                continue
        kind = node.__class__
        fields = fields_of.get(kind)
        if fields is None:
            fields = fields_of[kind] = tuple(f for f in kind._fields if f not in ("ctx", "op", "ops"))
        for name in fields:
            value = getattr(node, name, None)
            if value.__class__ is list:
                stack.extend([item for item in value if isinstance(item, ast.AST) and item.__class__ not in skipped])
            elif isinstance(value, ast.AST) and value.__class__ not in skipped:
                stack.append(value)
    return out


class Body:
    """One function: its local `name = expr` bindings, to follow a pattern across statements."""

    def __init__(self, func: ast.AST, names: Names) -> None:
        self.names = names
        # its own nodes but names and constants: every reader looks for calls, operations, assignments
        self.nodes = own_node_list(func, leaves=False)
        self.bound: dict[str, list[tuple[int, ast.expr]]] = {}  # name -> (line, value) in line order
        self.chunks: dict[str, tuple[int, ast.Call]] = {}  # `a, b = x.chunk(2, -1)`: a -> (0, call)
        for node in sorted((n for n in self.nodes if isinstance(n, ast.Assign)), key=lambda n: n.lineno):
            if len(node.targets) != 1:
                continue
            target = node.targets[0]
            if isinstance(target, ast.Name):
                self.bound.setdefault(target.id, []).append((node.lineno, node.value))
            elif isinstance(target, ast.Tuple) and _is_chunk(node.value, self.names):
                assert isinstance(node.value, ast.Call)
                for i, elt in enumerate(target.elts):
                    if isinstance(elt, ast.Name):
                        self.chunks[elt.id] = (i, node.value)

    def value(self, node: ast.AST, depth: int = 4) -> ast.AST:
        """The expression a local name stands for where it is read (the last binding on an earlier
        line; `att = f(att)` chains), followed a few steps; else the node."""
        while depth and isinstance(node, ast.Name) and node.id in self.bound:
            earlier = [value for line, value in self.bound[node.id] if line < node.lineno]
            if not earlier:
                break
            node, depth = earlier[-1], depth - 1
        return node

    def is_call(self, node: ast.AST, qualnames: set[str], method: str | None = None) -> bool:
        node = self.value(node)
        if not isinstance(node, ast.Call):
            return False
        if self.names(node.func) & qualnames:
            return True
        return method is not None and isinstance(node.func, ast.Attribute) and node.func.attr == method


def _is_chunk(node: ast.AST, names: Names) -> bool:
    """`x.chunk(2, -1)`, `x.chunk(2, dim=-1)`, `torch.chunk(x, 2, -1)`."""
    if not isinstance(node, ast.Call):
        return False
    if names(node.func) & {"torch.chunk"}:
        args = node.args[1:]
    elif isinstance(node.func, ast.Attribute) and node.func.attr == "chunk":
        args = node.args
    else:
        return False
    return bool(args) and isinstance(args[0], ast.Constant) and args[0].value == 2


# the torch_npu op each detector's pattern becomes: a function already calling it was fused (by hand or by
# `migrate fix --fuse`, which keeps the eager code as the other devices' branch), so it gets no advice
FUSED_OPS = {"fusion-rms-norm": "npu_rms_norm", "fusion-swiglu": "npu_swiglu", "fusion-rotary": "npu_rotary_mul",
             "fusion-attention": "npu_fusion_attention"}


def fused_here(body: Body) -> set[str]:
    """The detectors (impl names) whose fused op the function already calls."""
    called = {_last_name(n.func) for n in body.nodes if isinstance(n, ast.Call)}
    return {impl for impl, op in FUSED_OPS.items() if op in called}


def _last_name(func: ast.AST) -> str:
    """`src(func).rsplit(".", 1)[-1]` without unparsing a plain name or an attribute (their text ends so)."""
    if func.__class__ is ast.Name:
        return func.id
    if func.__class__ is ast.Attribute:
        return func.attr
    return src(func).rsplit(".", 1)[-1]


# the word a detector's pattern cannot match without: its function's lines name it (or a local alias of it)
DETECTOR_WORDS = {"rms_norm": "rsqrt", "swiglu": "silu", "attention": "softmax"}


def detect_all(body: Body, emit: Emit, attention: Callable[[Body, Emit], None],
               named: Callable[[str], bool] | None = None) -> None:
    """Every detector on one function, leaving out those whose fused op it already calls.
    (`attention` lives in `fusion_attention`, which imports this module.) `named(word)`: whether the
    function's text names a `DETECTOR_WORDS` word, where the caller knows; a detector whose word it does
    not name is not run (rotary, which matches `rotate_half` in unparsed text, always is)."""
    done = fused_here(body)

    def unless_done(impl: str, node: ast.AST, symbol: str, replacement: str) -> None:
        if impl not in done:
            emit(impl, node, symbol, replacement)

    for name, detect in (("rms_norm", rms_norm), ("swiglu", swiglu), ("rotary", rotary), ("attention", attention)):
        word = DETECTOR_WORDS.get(name)
        if named is None or word is None or named(word):
            detect(body, unless_done)


def src(node: ast.AST | None) -> str:
    return ast.unparse(node) if node is not None else "?"


# -- RMSNorm: x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * weight ------------------------
def _square_mean(body: Body, node: ast.AST) -> ast.AST | None:
    """x of `x.pow(2).mean(-1, keepdim=True)` (also `(x * x)`, `x ** 2`, `torch.mean(..)`)."""
    node = body.value(node)
    if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "mean"):
        return None
    if body.names(node.func) & {"torch.mean"}:  # `torch.mean(x * x, dim=-1, keepdim=True)` (litgpt)
        if not node.args:
            return None
        inner = body.value(node.args[0])
    else:
        inner = body.value(node.func.value)
    if isinstance(inner, ast.Call) and isinstance(inner.func, ast.Attribute) and inner.func.attr == "pow":
        if inner.args and isinstance(inner.args[0], ast.Constant) and inner.args[0].value == 2:
            return inner.func.value
    if isinstance(inner, ast.BinOp) and isinstance(inner.op, ast.Pow):
        return inner.left
    if isinstance(inner, ast.BinOp) and isinstance(inner.op, ast.Mult) and src(inner.left) == src(inner.right):
        return inner.left
    return None


def _weight_of(body: Body, rsqrt: ast.Call, x: ast.AST) -> str:
    """The weight multiplied onto the normalised value: the factor beside the rsqrt when it is not x
    (`scale * torch.rsqrt(...)`, k-diffusion), else a product naming a weight (`self.weight * x`), else `weight`."""
    for node in body.nodes:
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mult) and rsqrt in (node.left, node.right):
            other = node.right if node.left is rsqrt else node.left
            if src(other) != src(x):
                return src(other)
    for node in body.nodes:
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mult):
            for side in (node.left, node.right):
                if "weight" in src(side) or "gamma" in src(side):
                    return src(side)
    return "weight"


def rms_norm(body: Body, emit: Emit) -> None:
    for node in body.nodes:
        if not (isinstance(node, ast.Call) and body.is_call(node, RSQRT, "rsqrt") and node.args):
            continue
        arg = body.value(node.args[0])
        if not (isinstance(arg, ast.BinOp) and isinstance(arg.op, ast.Add)):
            continue
        x = _square_mean(body, arg.left)
        if x is None:
            continue
        mapping = f"torch_npu.npu_rms_norm({src(x)}, {_weight_of(body, node, x)}, epsilon={src(arg.right)})[0]"
        emit("fusion-rms-norm", node, "x * torch.rsqrt(mean(x^2) + eps) * weight", mapping)


# -- SwiGLU: a, b = x.chunk(2, -1); F.silu(a) * b -------------------------------------------------
def swiglu(body: Body, emit: Emit) -> None:
    for node in body.nodes:
        if not (isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mult)):
            continue
        for act, other in ((node.left, node.right), (node.right, node.left)):
            if not (isinstance(act, ast.Call) and body.names(act.func) & SILU and act.args):
                continue
            gate, up = act.args[0], other
            if not (isinstance(gate, ast.Name) and isinstance(up, ast.Name)):
                continue
            g, u = body.chunks.get(gate.id), body.chunks.get(up.id)
            if g is None or u is None or g[1] is not u[1]:
                continue
            chunk = g[1]
            source = chunk.args[0] if body.names(chunk.func) & {"torch.chunk"} else chunk.func.value  # type: ignore[attr-defined]
            dims = chunk.args[2:] if body.names(chunk.func) & {"torch.chunk"} else chunk.args[1:]
            dim = next((k.value for k in chunk.keywords if k.arg == "dim"), dims[0] if dims else None)
            mapping = f"torch_npu.npu_swiglu({src(source)}, dim={src(dim) if dim is not None else 0})"
            if g[0] != 0:  # npu_swiglu takes the gate from the first half
                mapping += " after swapping the halves (the gate is the second chunk here)"
            emit("fusion-swiglu", node, "F.silu(gate) * up", mapping)
            break


# -- NeoX rotary: x * cos + rotate_half(x) * sin ---------------------------------------------------
def _product(node: ast.AST) -> tuple[ast.AST, ast.AST] | None:
    return (node.left, node.right) if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mult) else None


def rotary(body: Body, emit: Emit) -> None:
    for node in body.nodes:
        if not (isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add)):
            continue
        plain, rotated = _product(node.left), _product(node.right)
        if plain is None or rotated is None:
            continue
        rot, sin = rotated
        if not (isinstance(rot, ast.Call) and "rotate_half" in src(rot.func) and rot.args):
            rot, sin = sin, rot
        if not (isinstance(rot, ast.Call) and "rotate_half" in src(rot.func) and rot.args):
            continue
        x, cos = plain if src(plain[0]) == src(rot.args[0]) else (plain[1], plain[0])
        if src(x) != src(rot.args[0]):
            continue
        mapping = f"torch_npu.npu_rotary_mul({src(x)}, {src(cos)}, {src(sin)}, rotary_mode='half')"
        emit("fusion-rotary", node, "x * cos + rotate_half(x) * sin", mapping)
