"""Triton kernels on Ascend (the `kernels` family, KERN008-KERN010): one finding per construct
Triton-Ascend does not run, judged against the generated table (`op_coverage/triton-ascend.json`).

A kernel is a function decorated with `triton.jit` (directly or under `triton.autotune` /
`triton.heuristics`); its `triton.jit` helpers are kernels too. Names are resolved through the
file's imports, so `tl.dot`, `triton.language.dot` and `from triton.language import dot` agree.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator, Sequence

from migrator.catalogue.coverage import triton_ascend
from migrator.engine.fusion_checker import Emit, Names, src
from migrator.engine.node_walk import children, walk_nodes

TL = "triton.language."
DECORATORS = {"triton.jit", "triton.autotune", "triton.heuristics"}
DTYPES = {"int8": "int8", "int16": "int16", "int32": "int32", "int64": "int64", "uint32": "uint32",
          "float16": "fp16", "float32": "fp32", "bfloat16": "bf16", "int1": "bool"}
BYTES = {"int8": 1, "int16": 2, "int32": 4, "int64": 8, "uint32": 4, "fp16": 2, "fp32": 4, "bf16": 2, "bool": 1}
OPERATORS = {ast.Add: "add", ast.Sub: "sub", ast.Mult: "mul", ast.Div: "div", ast.FloorDiv: "floordiv",
             ast.Mod: "mod", ast.LShift: "lshift", ast.RShift: "rshift", ast.BitAnd: "and", ast.BitOr: "or",
             ast.BitXor: "xor"}
POINTER_OPS = {"load", "store", "advance", "make_block_ptr", "atomic_add", "atomic_and", "atomic_cas", "atomic_max",
               "atomic_min", "atomic_or", "atomic_xchg", "atomic_xor"}  # first argument is a pointer
SAME_DTYPE = {"broadcast_to", "expand_dims", "permute", "ravel", "reshape", "trans", "view", "flip", "abs", "neg"}
CREATION_DTYPE = {"zeros": 1, "full": 2}  # positional index of `dtype`
# GPU-only APIs absent from the Triton-Ascend table: (qualified-name test, what to say)
LIBDEVICE = ("triton.language.extra.cuda", "triton.language.extra.libdevice", "triton.language.math.libdevice")
TMA = ("_experimental_descriptor_load", "_experimental_descriptor_store", "_experimental_make_tensor_descriptor",
       "triton.tools.experimental_descriptor", "triton.tools.tensor_descriptor")
ACTIVE_DEVICE = "triton.runtime.driver.active.get_active_torch_device"


def kernels(tree: ast.AST, names: Names, nodes: Sequence[ast.AST] | None = None) -> dict[str, ast.FunctionDef]:
    """Every `@triton.jit` function of the module by name (`nodes`: `ast.walk(tree)`'s, when already listed)."""
    found: dict[str, ast.FunctionDef] = {}
    for node in ast.walk(tree) if nodes is None else nodes:
        if isinstance(node, ast.FunctionDef):
            for dec in node.decorator_list:
                if names(dec.func if isinstance(dec, ast.Call) else dec) & DECORATORS:
                    found[node.name] = node
    return found


def gpu_only(qualname: str) -> str | None:
    """What makes the name CUDA-only, or None."""
    if qualname.startswith(LIBDEVICE):
        return "libdevice (CUDA's math library): use `tl.math` / `tl.extra` equivalents"
    if any(part in qualname for part in TMA):
        return "TMA tensor descriptor (Hopper): use `tl.make_block_ptr` or make/load/store_tensor_descriptor together"
    if qualname.startswith(TL) and qualname.rsplit(".", 1)[-1].startswith("float8"):
        return "fp8 type: Ascend A2 has no fp8"
    if qualname == ACTIVE_DEVICE:
        return "GPU device lookup: NPU tensors come from `device='npu'`"
    op = triton_ascend.ops().get(qualname[len(TL):]) if qualname.startswith(TL) else None
    if op is not None and op.status == "unsupported":
        return f"not implemented by Triton-Ascend for any dtype ({op.source})"
    return None


def dtype_of(node: ast.AST | None, names: Names) -> str | None:
    """The table's dtype name of a `tl.<dtype>` expression."""
    for name in names(node) if node is not None else ():
        if name.startswith(TL) and name[len(TL):] in DTYPES:
            return DTYPES[name[len(TL):]]
    return None


class Kernel:
    """One kernel body: the dtypes its names are known to hold, and what to report."""

    def __init__(self, func: ast.FunctionDef, names: Names, emit: Emit) -> None:
        self.func, self.names, self.emit = func, names, emit
        self.dtypes: dict[str, str] = {}
        self.seen: set[tuple[str, str]] = set()
        self.inner: set[int] = set()  # `tl.extra.cuda` inside `tl.extra.cuda.libdevice.exp`: judged as the whole

    def report(self, impl: str, node: ast.AST, symbol: str, why: str) -> None:
        if (impl, symbol) not in self.seen:  # one finding per construct and kernel, not per use
            self.seen.add((impl, symbol))
            self.emit(impl, node, symbol, why)

    def expr_dtype(self, node: ast.AST) -> str | None:
        if isinstance(node, ast.Name):
            return self.dtypes.get(node.id)
        if isinstance(node, ast.Call):
            op = self.op_name(node.func)
            if op == "arange":
                return "int32"
            if op in CREATION_DTYPE:
                return dtype_of(_arg(node, CREATION_DTYPE[op], "dtype"), self.names)
            if op in SAME_DTYPE and node.args:
                return self.expr_dtype(node.args[0])
            if op == "cast" or (isinstance(node.func, ast.Attribute) and node.func.attr == "to"):
                return dtype_of(_arg(node, 1 if op == "cast" else 0, "dtype"), self.names)
        if isinstance(node, ast.BinOp):
            return self.expr_dtype(node.left) or self.expr_dtype(node.right)
        return None

    def op_name(self, func: ast.AST) -> str | None:
        for name in self.names(func):
            if name.startswith(TL):
                return name[len(TL):]
        return None

    def check(self) -> None:
        for node in _walk_ordered(self.func):
            if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
                if (dt := self.expr_dtype(node.value)) is not None:
                    self.dtypes[node.targets[0].id] = dt
            elif isinstance(node, (ast.Attribute, ast.Name)) and id(node) not in self.inner:
                if isinstance(node, ast.Attribute):
                    self.inner.update(id(n) for n in walk_nodes(node.value))
                for qualname in sorted(self.names(node)):  # one finding per use: a name bound by several imports
                    if (why := gpu_only(qualname)) is not None:
                        self.report("triton-gpu-only", node, "tl." + qualname.removeprefix(TL) if qualname.startswith(TL) else qualname, why)
                        break
            elif isinstance(node, ast.Call):
                self.call(node)
            elif isinstance(node, ast.BinOp) and type(node.op) in OPERATORS:
                self.dtype_support(node, OPERATORS[type(node.op)], self.expr_dtype(node.left), src(node))

    def call(self, node: ast.Call) -> None:
        op = self.op_name(node.func)
        for kw in node.keywords:
            if kw.arg == "warp_specialize":
                self.report("triton-gpu-only", kw.value, "warp_specialize",
                            "warp specialisation (Hopper/Blackwell): Ascend cores have no warps")
            elif kw.arg == "allow_tf32" and op == "dot":  # every use: each is its own rewrite
                self.emit("triton-dot-allow-tf32", kw.value, f"allow_tf32={src(kw.value)}",
                          "deprecated spelling: `input_precision=\"tf32\"` / `\"ieee\"`")
        if op in ("zeros", "full", "cast") or (op is None and isinstance(node.func, ast.Attribute)
                                               and node.func.attr == "to"):
            self.dtype_support(node, op or "cast", self.expr_dtype(node), src(node))
        elif op is not None and op not in POINTER_OPS:
            self.dtype_support(node, op, self.expr_dtype(node.args[0]) if node.args else None, src(node))
        elif isinstance(node.func, ast.Attribute) and isinstance(node.func.value, ast.Name):
            self.dtype_support(node, node.func.attr, self.dtypes.get(node.func.value.id), src(node))

    def dtype_support(self, node: ast.AST, op: str, dtype: str | None, text: str) -> None:
        row = triton_ascend.ops().get(op)
        if row is None or dtype is None or row.status != "supported" or row.supports(dtype) is not False:
            return
        self.report("triton-unsupported-dtype", node, f"{op} on {dtype}",
                    f"`{text}`: Triton-Ascend's `{op}` does not take {dtype} ({row.source})")


def _arg(call: ast.Call, index: int, keyword: str) -> ast.expr | None:
    for kw in call.keywords:
        if kw.arg == keyword:
            return kw.value
    return call.args[index] if len(call.args) > index else None


def _walk_ordered(func: ast.FunctionDef) -> Iterator[ast.AST]:
    """Source order (assignments before their uses), decorators left out; contexts and operators too (`check`
    reads neither)."""
    todo: list[ast.AST] = list(reversed(func.body))
    while todo:
        node = todo.pop()
        yield node
        todo.extend(reversed(children(node)))


def check_module(tree: ast.AST, names: Names, emit: Emit, nodes: Sequence[ast.AST] | None = None) -> dict[str, ast.FunctionDef]:
    """Report each kernel's constructs and every CUDA-only Triton name outside kernels; the kernels.
    `nodes`: `ast.walk(tree)`'s, when the caller has listed them for several passes."""
    nodes = list(ast.walk(tree)) if nodes is None else nodes
    found = kernels(tree, names, nodes)
    inside: set[int] = set()
    for func in found.values():
        Kernel(func, names, emit).check()
        inside.update(id(n) for n in walk_nodes(func))
    reported: set[str] = set()
    for node in nodes:  # launch code: `get_active_torch_device()`, host TMA descriptors
        if id(node) not in inside and isinstance(node, ast.Attribute):
            _mark_attributes(node.value, inside)
            for qualname in names(node):
                why = gpu_only(qualname)
                if why is not None and qualname not in reported and not qualname.startswith(TL):
                    reported.add(qualname)
                    emit("triton-gpu-only", node, qualname, why)
    return found


def _mark_attributes(value: ast.AST, inside: set[int]) -> None:
    """Add the ids of the attributes in `value` (the only nodes `check_module` asks `inside` about): a dotted
    name's links one by one (most values), anything else by a walk."""
    while value.__class__ is ast.Attribute:
        inside.add(id(value))
        value = value.value
    if value.__class__ is not ast.Name:
        inside.update(id(n) for n in walk_nodes(value))
