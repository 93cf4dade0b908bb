"""The dtype of a local tensor name, proven in its own function (or module body).

A name has a dtype only when every binding of it in the scope builds a tensor of that one dtype:
`idx = torch.zeros(n, dtype=torch.int32)`, `mask = m.byte()`, `k = x.to(torch.int64)`, `order =
torch.argsort(s)`, `y = idx` (a name with a proven dtype). A parameter, a loop or `with` target, a
tuple unpacking, an augmented assignment or a binding we cannot read makes it unknown: the op
work-around rules (OPS010) judge only proven dtypes (precision over recall).
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Iterator
from collections.abc import Set as AbstractSet

from migrator.engine.statements import BLOCKS, block_fields

Qualnames = Callable[[ast.AST], set[str]]

# torch dtype objects -> the coverage table's dtype names
TORCH_DTYPES = {
    "torch.int64": "int64", "torch.long": "int64", "torch.int32": "int32", "torch.int": "int32",
    "torch.int16": "int16", "torch.short": "int16", "torch.int8": "int8", "torch.uint8": "uint8",
    "torch.bool": "bool", "torch.float32": "fp32", "torch.float": "fp32", "torch.float16": "fp16",
    "torch.half": "fp16", "torch.bfloat16": "bf16", "torch.float64": "fp64", "torch.double": "fp64",
}
# argument-free cast methods
CAST_METHODS = {"long": "int64", "int": "int32", "short": "int16", "char": "int8", "byte": "uint8", "bool": "bool",
                "float": "fp32", "half": "fp16", "bfloat16": "bf16", "double": "fp64"}
# factories whose `dtype=` decides the result
FACTORIES = frozenset(f"torch.{name}" for name in (
    "zeros", "ones", "empty", "full", "tensor", "as_tensor", "arange", "randint", "randperm", "zeros_like",
    "ones_like", "empty_like", "full_like", "randint_like", "eye", "linspace",
))
# results that are int64 whatever the input (index results), without `dtype=`
INT64_RESULTS = frozenset(f"torch.{name}" for name in ("randint", "randperm", "argmax", "argmin", "argsort", "nonzero"))
INT64_METHODS = frozenset({"argmax", "argmin", "argsort", "nonzero"})
_NESTED = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda, ast.ListComp, ast.SetComp,
           ast.DictComp, ast.GeneratorExp)
_UNKNOWN = "?"  # a binding whose dtype we cannot prove


def scope_nodes(body: list[ast.stmt]) -> Iterator[ast.AST]:
    """Every node of a scope's statements, not entering nested functions, classes, lambdas or
    comprehensions (their names are their own)."""
    stack: list[ast.AST] = list(reversed(body))
    while stack:
        node = stack.pop()
        yield node
        if isinstance(node, _NESTED):
            continue
        stack.extend(reversed(list(ast.iter_child_nodes(node))))


# fields that never hold a node a binding or a call can be: names, flags, contexts and operators
_LEAF_FIELDS = frozenset({"ctx", "op", "ops", "id", "attr", "arg", "name", "module", "level", "kind", "is_async",
                          "type_comment", "conversion", "value_str"})
_CHILD_FIELDS: dict[type, tuple[str, ...]] = {}


def _own_nodes(body: list[ast.stmt]) -> list[ast.AST]:
    """`scope_nodes` in the same order, without contexts and operators (`ScopeDtypes` reads neither), and
    with each class's child fields looked up once (the scope walk is an op-coverage cost of every call site)."""
    out: list[ast.AST] = []
    stack: list[ast.AST] = list(reversed(body))
    while stack:
        node = stack.pop()
        out.append(node)
        if isinstance(node, _NESTED):
            continue
        fields = _CHILD_FIELDS.get(type(node))
        if fields is None:
            fields = _CHILD_FIELDS[type(node)] = tuple(f for f in node._fields if f not in _LEAF_FIELDS)
        children: list[ast.AST] = []
        for field in fields:
            value = getattr(node, field, None)
            if isinstance(value, ast.AST):
                children.append(value)
            elif isinstance(value, list):
                children.extend(item for item in value if isinstance(item, ast.AST))
        stack.extend(reversed(children))
    return out


def _dtype_name(node: ast.AST | None, qualnames: Qualnames) -> str | None:
    if node is None:
        return None
    for name in qualnames(node):
        if name in TORCH_DTYPES:
            return TORCH_DTYPES[name]
    return None


def _literal_kind(node: ast.AST) -> str | None:
    """int64 for a (nested) list of int literals, bool for one of bool literals (`torch.tensor([1, 2])`)."""
    values = [n.value for n in ast.walk(node) if isinstance(n, ast.Constant)]
    if not values or not all(isinstance(n, (ast.List, ast.Tuple, ast.Constant)) for n in ast.walk(node)
                             if not isinstance(n, ast.expr_context)):
        return None
    if all(isinstance(v, bool) for v in values):
        return "bool"
    if all(isinstance(v, int) and not isinstance(v, bool) for v in values):
        return "int64"
    return None


def _call_dtype(call: ast.Call, qualnames: Qualnames) -> str | None:
    keywords = {k.arg: k.value for k in call.keywords if k.arg}
    names = qualnames(call.func)
    if names & FACTORIES or names & INT64_RESULTS:
        if "dtype" in keywords:
            return _dtype_name(keywords["dtype"], qualnames)
        if names & INT64_RESULTS:
            return "int64"
        if names & {"torch.tensor", "torch.as_tensor"} and call.args:
            return _literal_kind(call.args[0])
        return None
    if names or not isinstance(call.func, ast.Attribute):
        return None  # another library's function, or a plain function of ours
    method = call.func.attr
    if method in CAST_METHODS and not call.args and not call.keywords:
        return CAST_METHODS[method]
    if method in ("to", "type"):
        picked = keywords.get("dtype")
        for arg in call.args:
            picked = picked or (arg if _dtype_name(arg, qualnames) else None)
        return _dtype_name(picked, qualnames)
    if method in INT64_METHODS and "dtype" not in keywords:
        return "int64"
    return None


def expr_dtype(node: ast.AST, qualnames: Qualnames, known: Callable[[str], str | None]) -> str | None:
    if isinstance(node, ast.Name):
        return known(node.id)
    if isinstance(node, ast.Call):
        return _call_dtype(node, qualnames)
    return None


def whole_bindings(body: list[ast.stmt], names: AbstractSet[str]) -> dict[str, list[ast.expr]]:
    """Each of `names` -> the values the assignments of a scope's statements bind to it as a whole target (`x = v`,
    `a = x = v`, `x: T = v`): the only bindings `ScopeDtypes` reads a value of (its others make a name unknown).
    A walk of the statements alone (assignments are statements), not entering nested functions and classes."""
    out: dict[str, list[ast.expr]] = {}
    stack = list(body)
    assign, annotated, plain, blocks = ast.Assign, ast.AnnAssign, ast.Name, BLOCKS
    while stack:
        node = stack.pop()
        kind = node.__class__
        if kind is assign:
            targets, value = node.targets, node.value  # type: ignore[attr-defined]
        elif kind is annotated:
            if node.value is None:  # type: ignore[attr-defined]
                continue
            targets, value = [node.target], node.value  # type: ignore[attr-defined]
        else:
            if kind not in _SCOPE_STATEMENTS:
                fields = blocks.get(kind)
                for field in block_fields(kind) if fields is None else fields:
                    stack.extend(getattr(node, field))
            continue
        for target in targets:
            if target.__class__ is plain and target.id in names:
                out.setdefault(target.id, []).append(value)
    return out


_SCOPE_STATEMENTS = frozenset({ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef})


def may_be_proven(values: list[ast.expr], qualnames: Qualnames) -> bool:
    """Whether a name a scope binds to these values (as a whole target: `whole_bindings`) can have a proven dtype
    there: each must have one (a call read as a dtype, or a name that may). One that has none, or no value at all,
    leaves the name unknown (`ScopeDtypes.dtype`), so the scope's nodes need not be walked to find it out."""
    return bool(values) and all(
        value.__class__ is ast.Name or (value.__class__ is ast.Call and _call_dtype(value, qualnames))
        for value in values)


def parameters(function: ast.FunctionDef | ast.AsyncFunctionDef) -> list[str]:
    """The names of a function's parameters: never of a proven dtype in it."""
    args = function.args
    return [arg.arg for arg in (*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg)
            if arg is not None]


# the node classes `ScopeDtypes._bind` reads a binding from
_BINDERS = frozenset({ast.Assign, ast.AnnAssign, ast.AugAssign, ast.For, ast.AsyncFor, ast.withitem, ast.NamedExpr,
                      ast.Global, ast.Nonlocal, ast.Import, ast.ImportFrom, ast.FunctionDef, ast.AsyncFunctionDef,
                      ast.ClassDef})


class ScopeDtypes:
    """Proven dtypes of one scope's local names; `dtype(name)` is None when unknown."""

    def __init__(self, scope: ast.AST, body: list[ast.stmt], qualnames: Qualnames) -> None:
        self._qualnames = qualnames
        self._values: dict[str, list[ast.AST | None]] = {}  # name -> the values bound to it (None: unreadable)
        self._memo: dict[str, str | None] = {}
        if isinstance(scope, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for name in parameters(scope):
                self._values.setdefault(name, []).append(None)
        nodes = _own_nodes(body)
        self.node_ids: set[int] = {id(node) for node in nodes}  # every node of the scope's own (`scope_nodes`), by id
        for node in nodes:
            if node.__class__ in _BINDERS:  # `_bind` does nothing to any other node
                self._bind(node)

    def _bind(self, node: ast.AST) -> None:
        if isinstance(node, ast.Assign):
            for target in node.targets:
                self._target(target, node.value if isinstance(target, ast.Name) else None)
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            self._target(node.target, node.value)
        elif isinstance(node, (ast.AugAssign, ast.For, ast.AsyncFor)):
            self._target(node.target, None)
        elif isinstance(node, ast.withitem) and node.optional_vars is not None:
            self._target(node.optional_vars, None)
        elif isinstance(node, ast.NamedExpr):
            self._target(node.target, None)
        elif isinstance(node, (ast.Global, ast.Nonlocal)):
            for name in node.names:
                self._values.setdefault(name, []).append(None)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            for alias in node.names:
                self._values.setdefault((alias.asname or alias.name).split(".")[0], []).append(None)
        elif isinstance(node, _NESTED[:3]):
            self._values.setdefault(node.name, []).append(None)

    def _target(self, target: ast.AST, value: ast.AST | None) -> None:
        for node in ast.walk(target):
            if isinstance(node, ast.Name):
                self._values.setdefault(node.id, []).append(value if node is target else None)

    def dtype(self, name: str) -> str | None:
        if name not in self._memo:
            self._memo[name] = _UNKNOWN  # a name bound to itself (`x = x.long()`) stays unknown
            values = self._values.get(name, [None])
            found = {expr_dtype(v, self._qualnames, self.dtype) if v is not None else None for v in values}
            self._memo[name] = found.pop() if len(found) == 1 else None
        result = self._memo[name]
        return None if result == _UNKNOWN else result
