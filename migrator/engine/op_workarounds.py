"""Op work-arounds human Ascend ports made, reported where torch-npu still needs them (OPS010, OPS011).

Each entry names the op, what the port changed and the coverage-table fact that makes it necessary;
the finding is raised only while the generated table (`op_coverage/torch_npu-<version>.json`) still
says so, so a torch-npu release that lifts the limit silences it with no code change.

* OPS010 `op-dtype-limit`: an op in `DTYPE_WORKAROUNDS` called on a local tensor whose integer or bool
  dtype is proven in the same function (`engine/dtype_evidence.py`) and that the op's documented
  list leaves out. Floating dtypes are OPS004's (module-wide evidence); an unknown dtype is never judged.
* OPS011 `op-argument-limit`: an argument value the table's limits (or an ATen kernel the argument
  needs) rule out, from `ARGUMENT_WORKAROUNDS`; a non-literal value is not judged.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Iterator
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING

from migrator.engine.dtype_evidence import ScopeDtypes, may_be_proven, parameters, whole_bindings

if TYPE_CHECKING:
    from migrator.catalogue.coverage import CoverageEntry
    from migrator.engine.python_checker import PythonChecker

# (impl, node, symbol, message, then no coverage info, op or status): `coverage_checker.CoverageHit`'s shape
WorkaroundHit = tuple[str, ast.expr, str, str, None, None, None]
INDEX_DTYPES = frozenset({"uint8", "int8", "int16", "int32", "int64", "bool"})

# op -> the port's work-around; judged for integer / bool inputs the op's documented list leaves out
DTYPE_WORKAROUNDS = {
    # div_(rounding_mode=...) on an index tensor: torch-Tensor.md `div_` lists bf16/fp16/fp32/fp64 only
    "torch.Tensor.div_": "out of place: `x = torch.div(x, y, rounding_mode=...)` (torch.div lists int32/int64)",
    "torch.Tensor.divide_": "out of place: `x = torch.div(x, y, rounding_mode=...)` (torch.div lists int32/int64)",
    "torch.Tensor.floor_divide_": "out of place: `x = torch.div(x, y, rounding_mode=\"floor\")`",
    # masked_fill on a uint8/int16 tensor: torch-Tensor.md lists fp16/fp32/int64/bool (in place: + bf16/int8/int32)
    "torch.Tensor.masked_fill": "`torch.where(mask, value, x)` (torch.where lists uint8..int64) or a bool / int64 tensor",
    "torch.Tensor.masked_fill_": "`x = torch.where(mask, value, x)` (torch.where lists uint8..int64) or a bool / int64 tensor",
    # kthvalue: torch.md lists fp16/fp32/int32
    "torch.kthvalue": "cast to int32 (values fit) or fp32 around it, or `torch.sort(x, dim).values.select(dim, k - 1)`",
    "torch.Tensor.kthvalue": "cast to int32 (values fit) or fp32 around it, or `x.sort(dim).values.select(dim, k - 1)`",
    # index_add_ on int32 counters: fp16/fp32/int64/bool
    "torch.index_add": "accumulate in int64 (`.long()`), cast back after",
    "torch.Tensor.index_add_": "accumulate in int64 (`.long()`), cast back after",
    "torch.Tensor.index_add": "accumulate in int64 (`.long()`), cast back after",
    # sort / argsort of bool keys: fp16/fp32/uint8..int64
    "torch.sort": "sort `x.to(torch.uint8)` (or `.int()`) and compare the result as bool",
    "torch.argsort": "argsort `x.to(torch.uint8)` (or `.int()`)",
    "torch.Tensor.sort": "sort `x.to(torch.uint8)` (or `.int()`) and compare the result as bool",
    "torch.Tensor.argsort": "argsort `x.to(torch.uint8)` (or `.int()`)",
    # gather from a uint8/int8 table: fp16/fp32/int16/int32/int64/bool
    "torch.gather": "gather from `x.int()` and cast back",
    "torch.Tensor.gather": "gather from `x.int()` and cast back",
    # remainder of uint8/int8: fp16/fp32/int16/int32/int64
    "torch.remainder": "compute in int32 (`.int()`) and cast back",
    "torch.Tensor.remainder": "compute in int32 (`.int()`) and cast back",
}


@dataclass(frozen=True)
class ArgumentWorkaround:
    api: str
    argument: str
    position: int | None  # index among the positional arguments (a method's receiver not counted)
    bad: Callable[[object], bool]  # the literal values the table rules out
    limit: str  # a phrase of the table entry's limits, or `aten::OP` whose kernel must be missing
    use_instead: str


def _is(value: object) -> Callable[[object], bool]:
    return lambda v: v is value


def _nonzero(v: object) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and v != 0


def _given(v: object) -> bool:
    return v is not None


SPARSE_COO = "aten::_sparse_coo_tensor_with_dims_and_tensors"
ARGUMENT_WORKAROUNDS = (
    ArgumentWorkaround("torch.topk", "sorted", 4, _is(False), "sorted=False not supported",
                       "`sorted=True`: a sorted result is a valid unsorted one"),
    ArgumentWorkaround("torch.Tensor.topk", "sorted", 3, _is(False), "sorted=True only",
                       "`sorted=True`: a sorted result is a valid unsorted one"),
    ArgumentWorkaround("torch.sum", "dtype", None, _given, "dtype argument not supported",
                       "cast first: `x.to(dtype).sum(...)`"),
    ArgumentWorkaround("torch.nn.LSTM", "dropout", 5, _nonzero, "dropout argument not supported",
                       "single-layer `nn.LSTM`s stacked with `nn.Dropout` between them"),
    ArgumentWorkaround("torch.nn.LSTM", "proj_size", 7, _nonzero, "proj_size argument not supported",
                       "`proj_size=0` and an `nn.Linear(hidden_size, proj_size)` on the output"),
    ArgumentWorkaround("torch.nn.GRU", "dropout", 5, _nonzero, "dropout argument not supported",
                       "single-layer `nn.GRU`s stacked with `nn.Dropout` between them"),
    ArgumentWorkaround("torch.nn.functional.kl_div", "log_target", 5, _is(True), "log_target=False only",
                       "`F.kl_div(input, target.exp(), log_target=False)` (the same loss)"),
    ArgumentWorkaround("torch.nn.KLDivLoss", "log_target", 3, _is(True), "log_target=False only",
                       "`log_target=False` and pass `target.exp()`"),
    # sparse gradients build a sparse COO tensor, which has no NPU kernel (sparse ops raise on NPU)
    ArgumentWorkaround("torch.nn.EmbeddingBag", "sparse", 6, _is(True), SPARSE_COO,
                       "`nn.Embedding` + a sum/mean over the bag with `sparse=False` (EmbeddingBag's backward "
                       "`_embedding_bag_backward` falls back to the CPU; `embedding_dense_backward` has an NPU kernel)"),
    ArgumentWorkaround("torch.nn.Embedding", "sparse", 6, _is(True), SPARSE_COO, "`sparse=False` (dense gradients)"),
    ArgumentWorkaround("torch.nn.functional.embedding", "sparse", 6, _is(True), SPARSE_COO,
                       "`sparse=False` (dense gradients)"),
    ArgumentWorkaround("torch.nn.functional.embedding_bag", "sparse", 7, _is(True), SPARSE_COO,
                       "`F.embedding` + a sum/mean over the bag with `sparse=False`"),
)
ARGUMENTS_BY_API: dict[str, tuple[ArgumentWorkaround, ...]] = {}
for _rule in ARGUMENT_WORKAROUNDS:
    ARGUMENTS_BY_API[_rule.api] = (*ARGUMENTS_BY_API.get(_rule.api, ()), _rule)
# the Tensor methods either kind of work-around judges (every other method call is passed over unnamed)
_TENSOR = "torch.Tensor."
JUDGED_METHODS = frozenset(api[len(_TENSOR):] for api in (*ARGUMENTS_BY_API, *DTYPE_WORKAROUNDS) if api.startswith(_TENSOR))


@lru_cache(maxsize=4096)
def _entry(name: str, soc: str, version: str | None, dtype: str | None = None) -> CoverageEntry:
    from migrator.catalogue.coverage import lookup

    return lookup(name, soc=soc, dtype=dtype, version=version)


def _limit_holds(rule: ArgumentWorkaround, soc: str, version: str | None) -> str | None:
    """The table's words for the limit while the table still states it, else None."""
    if rule.limit.startswith("aten::"):
        kernel = _entry(rule.limit, soc, version).kernel
        return None if kernel.startswith("npu_kernel") else f"`{rule.limit[6:]}` has no NPU kernel ({kernel})"
    entry = _entry(rule.api, soc, version)
    return next((text for text in entry.limits if rule.limit in text), None)


def _argument(call: ast.Call, rule: ArgumentWorkaround) -> ast.expr | None:
    for keyword in call.keywords:
        if keyword.arg == rule.argument:
            return keyword.value
    if rule.position is not None and rule.position < len(call.args) and \
            not any(isinstance(a, ast.Starred) for a in call.args[:rule.position + 1]):
        return call.args[rule.position]
    return None


def _literal(node: ast.expr) -> tuple[bool, object]:
    try:
        return True, ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return False, None


def workaround_hits(checker: PythonChecker, soc: str, version: str | None) -> Iterator[WorkaroundHit]:
    """OPS010 and OPS011 hits of one module, from the calls the checker already resolved; a scope is
    walked for its dtypes only when it holds a call OPS010 judges."""
    candidates: list[tuple[str, ast.Call, str]] = []  # (api, call, the local name it computes on)
    for api, call in checker.calls:
        if api in ARGUMENTS_BY_API:
            yield from _argument_hits(call, api, soc, version)
        if api in DTYPE_WORKAROUNDS and call.args and isinstance(call.args[0], ast.Name):
            candidates.append((api, call, call.args[0].id))
    for receiver, method, call in checker.method_calls:
        if method not in JUDGED_METHODS:
            continue
        api = _TENSOR + method
        if api in ARGUMENTS_BY_API:
            yield from _argument_hits(call, api, soc, version)
        if receiver is not None and api in DTYPE_WORKAROUNDS:
            candidates.append((api, call, receiver))
    if candidates:
        scopes = _Scopes(checker, {name for _api, _call, name in candidates})
        for api, call, name in candidates:
            yield from _dtype_hits(call, api, scopes.dtype(call, name), soc, version)


class _Scopes:
    """The innermost function (or the module body) holding a call, and its proven dtypes."""

    def __init__(self, checker: PythonChecker, names: AbstractSet[str]) -> None:
        self._checker = checker
        self._names = names  # the names asked about
        self._bindings: dict[int, dict[str, list[ast.expr]]] = {}  # scope id -> its assignments of `names`
        self._built: dict[int, ScopeDtypes] = {}

    def dtype(self, call: ast.Call, name: str) -> str | None:
        """The proven dtype of `name` where `call` uses it; None when unknown, or when the call sits where the
        scope's names may not be its own (a lambda, a comprehension)."""
        line = call.lineno
        holding = [f for f in self._checker.functions if f.lineno <= line <= (f.end_lineno or f.lineno)]
        scope: ast.AST = max(holding, key=lambda f: f.lineno) if holding else self._checker.tree
        if isinstance(scope, (ast.FunctionDef, ast.AsyncFunctionDef)) and name in parameters(scope):
            return None  # a parameter's dtype is never proven: the scope is not walked
        body = getattr(scope, "body", [])
        if scope is self._checker.tree:
            body = [s for s in body if not isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))]
        bindings = self._bindings.get(id(scope))
        if bindings is None:
            bindings = self._bindings[id(scope)] = whole_bindings(body, self._names)
        if not may_be_proven(bindings.get(name, []), self._checker.qualnames):
            return None  # most names: bound to no value of a proven dtype here, so the scope's nodes are not walked
        if id(scope) not in self._built:
            self._built[id(scope)] = ScopeDtypes(scope, body, self._checker.qualnames)
        dtypes = self._built[id(scope)]
        return dtypes.dtype(name) if id(call) in dtypes.node_ids else None


def _argument_hits(call: ast.Call, api: str, soc: str, version: str | None) -> Iterator[WorkaroundHit]:
    for rule in ARGUMENTS_BY_API.get(api, ()):
        value = _argument(call, rule)
        if value is None:
            continue
        known, literal = _literal(value)
        given = rule.bad is _given and not (isinstance(value, ast.Constant) and value.value is None)
        if not given and (not known or not rule.bad(literal)):
            continue  # `dtype=torch.float32` is no literal but given all the same
        limit = _limit_holds(rule, soc, version)
        if limit is None:
            continue
        shown = ast.unparse(value)
        message = (f"`{api}({rule.argument}={shown})` on {soc}: {limit} (torch-npu {_entry(api, soc, version).version}); "
                   f"use instead {rule.use_instead}")
        yield ("op-argument-limit", call.func, f"{api}({rule.argument}=...)", message, None, None, None)


def _dtype_hits(call: ast.Call, api: str, dtype: str | None, soc: str, version: str | None) -> Iterator[WorkaroundHit]:
    if dtype not in INDEX_DTYPES:
        return
    plain = _entry(api, soc, version)
    if not plain.known or plain.status != "partial" or _entry(api, soc, version, dtype).status != "unsupported":
        return
    article = "an" if dtype.startswith("int") else "a"
    message = (f"`{api}` on {article} {dtype} tensor: {soc} documents it for {', '.join(plain.dtypes)} only "
               f"(torch-npu {plain.version}); use instead {DTYPE_WORKAROUNDS[api]}")
    yield ("op-dtype-limit", call.func, api, message, None, None, None)
