"""Where a repository declares its own C++/CUDA extensions, read statically from Python: setup.py's
`CUDAExtension(name=..., sources=[...])` / `CppExtension(...)` (also through a variable bound to one of
them, `extension = CUDAExtension if ... else CppExtension`) and `torch.utils.cpp_extension.load(name=...,
sources=[...])`. Sources are evaluated as far as plain Python allows without running it: string
literals, lists and `+`, names assigned in the same scope (with `+=`, `.append`, `.extend`),
`os.path.join`, `os.path.dirname(__file__)`, `Path(__file__).parent / "x"` and `glob.glob(pattern)`
(expanded on disk, inside the root). What cannot be evaluated marks the declaration `partial`.
"""

from __future__ import annotations

import ast
import glob as globlib
import os
from collections.abc import Callable
from dataclasses import dataclass

EXTENSION_CLASSES = {"CUDAExtension", "CppExtension", "SyclExtension"}
_CPP_SUFFIXES = (".cu", ".cuh", ".cpp", ".cc", ".cxx", ".c", ".h", ".hpp")


@dataclass(frozen=True)
class ExtensionDecl:
    name: str  # the module it builds (`detectron2._C`, `causal_conv1d_cuda`)
    path: str  # root-relative file that declares it
    line: int
    sources: tuple[str, ...]  # root-relative C++/CUDA files the declaration names
    partial: bool  # some sources could not be evaluated statically
    bound_to: str = ""  # `load()`: the variable its module is assigned to (`_C = load(...)`)
    cuda: bool = False  # declared as CUDA: `CUDAExtension(...)`, or a `.cu`/`.cuh` among its sources (even absent)


_MODULE_OF: dict[int, ast.Module] = {}  # while `declarations` runs: scope id -> its module


class _Unknown(Exception):
    """An expression this reader does not evaluate."""


def declarations(tree: ast.Module, rel: str, root: str) -> list[ExtensionDecl]:
    """Every extension `tree` (the module at root-relative `rel`) declares."""
    base = os.path.dirname(os.path.join(root, rel))
    classes = _extension_names(tree)
    found: list[ExtensionDecl] = []
    scopes = [tree, *(n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)))]
    _MODULE_OF.clear()
    _MODULE_OF.update({id(s): tree for s in scopes})  # a function's names fall back to the module's
    for scope in scopes:
        for node in _own_nodes(scope):
            call, bound = (node.value, _target_name(node)) if isinstance(node, ast.Assign) else (node, "")
            if not isinstance(call, ast.Call):
                continue
            callee = _callee(call.func)
            is_load = callee == "load" and _mentions_sources(call)
            if callee not in classes and not is_load:
                continue
            name = _argument(call, "name", 0)
            sources = _argument(call, "sources", 1)
            try:
                ext_name = _evaluate(name, scope, base, root) if name is not None else []
            except _Unknown:
                ext_name = []
            if len(ext_name) != 1:
                continue
            files, partial = _source_files(sources, scope, base, root)
            cuda = callee == "CUDAExtension" or any(f.endswith((".cu", ".cuh")) for f in files)
            found.append(ExtensionDecl(ext_name[0], rel, call.lineno, tuple(files), partial, bound if is_load else "", cuda))
    return found


def _extension_names(tree: ast.Module) -> set[str]:
    """CUDAExtension/CppExtension and the names bound to one of them (`extension = CUDAExtension`)."""
    names = set(EXTENSION_CLASSES)
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            values = [node.value.body, node.value.orelse] if isinstance(node.value, ast.IfExp) else [node.value]
            if any(_callee(v) in EXTENSION_CLASSES for v in values):
                names.add(node.targets[0].id)
    return names


def _own_nodes(scope: ast.AST) -> list[ast.AST]:
    """The statements and expression statements of `scope` (nested blocks too), not of nested functions."""
    out: list[ast.AST] = []
    stack = list(reversed(list(ast.iter_child_nodes(scope))))
    while stack:  # depth first, in source order
        node = stack.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            continue
        out.append(node)
        stack.extend(reversed(list(ast.iter_child_nodes(node))))
    return out


def _target_name(node: ast.Assign) -> str:
    target = node.targets[0]
    return target.id if isinstance(target, ast.Name) else ""


def _callee(func: ast.AST) -> str:
    if isinstance(func, ast.Name):
        return func.id
    if isinstance(func, ast.Attribute):
        return func.attr
    return ""


def _mentions_sources(call: ast.Call) -> bool:
    return any(k.arg == "sources" for k in call.keywords) or len(call.args) >= 2


def _argument(call: ast.Call, keyword: str, position: int) -> ast.expr | None:
    for k in call.keywords:
        if k.arg == keyword:
            return k.value
    return call.args[position] if len(call.args) > position else None


def _source_files(expr: ast.expr | None, scope: ast.AST, base: str, root: str) -> tuple[list[str], bool]:
    if expr is None:
        return [], True
    try:
        values = _evaluate(expr, scope, base, root)
        partial = False
    except _Unknown:
        values, partial = _literals(expr, base), True
    files: list[str] = []
    for value in values:
        path = os.path.normpath(value if os.path.isabs(value) else os.path.join(base, value))
        rel = os.path.relpath(path, root)
        if not rel.startswith("..") and rel.endswith(_CPP_SUFFIXES) and rel not in files:
            files.append(rel.replace(os.sep, "/"))
    return files, partial


def _literals(expr: ast.expr, base: str) -> list[str]:
    """The path-like string literals of an expression that could not be evaluated as a whole."""
    return [n.value for n in ast.walk(expr) if isinstance(n, ast.Constant) and isinstance(n.value, str)
            and n.value.endswith(_CPP_SUFFIXES)]


def _evaluate(expr: ast.expr, scope: ast.AST, base: str, root: str, depth: int = 0) -> list[str]:
    """The strings `expr` evaluates to (a list flattens); _Unknown for anything else."""
    if depth > 12:
        raise _Unknown
    again = lambda e: _evaluate(e, scope, base, root, depth + 1)  # noqa: E731
    if isinstance(expr, ast.Constant) and isinstance(expr.value, str):
        return [expr.value]
    if isinstance(expr, (ast.List, ast.Tuple)):
        return [v for element in expr.elts for v in again(element)]
    if isinstance(expr, ast.BinOp) and isinstance(expr.op, (ast.Add, ast.Div)):
        return _binop_value(expr, again(expr.left), again(expr.right), scope)
    if isinstance(expr, ast.Name):
        if expr.id == "__file__":
            return [os.path.join(base, "__file__")]
        return _name_value(expr.id, scope, base, root, depth)
    if isinstance(expr, ast.Attribute) and expr.attr == "parent":
        return [os.path.dirname(v) for v in again(expr.value)]
    if isinstance(expr, ast.Call):
        return _call_value(expr, again, root)
    raise _Unknown


def _binop_value(expr: ast.BinOp, left: list[str], right: list[str], scope: ast.AST) -> list[str]:
    """`a + b` (lists concatenate, strings join) and `Path(...) / "x"`."""
    if isinstance(expr.op, ast.Div):
        if len(left) == 1 and len(right) == 1:
            return [os.path.join(left[0], right[0])]
        raise _Unknown
    if isinstance(expr.left, (ast.List, ast.Tuple, ast.Call, ast.Name)) and not _is_string(expr.left, scope):
        return left + right
    if len(left) == 1 and len(right) == 1:
        return [left[0] + right[0]]
    return left + right


def _is_string(expr: ast.expr, scope: ast.AST) -> bool:
    return isinstance(expr, ast.Name) and any(
        isinstance(n, ast.Assign) and _target_name(n) == expr.id and isinstance(n.value, (ast.Constant, ast.JoinedStr))
        for n in _own_nodes(scope))


def _call_value(call: ast.Call, again: Callable[[ast.expr], list[str]], root: str) -> list[str]:
    callee = _callee(call.func)
    args = [again(a) for a in call.args]
    if callee == "join" and args and all(len(a) == 1 for a in args):
        return [os.path.join(*(a[0] for a in args))]
    if callee in ("dirname",) and len(args) == 1 and len(args[0]) == 1:
        return [os.path.dirname(args[0][0])]
    if callee in ("abspath", "realpath", "normpath", "Path", "str", "resolve", "sorted", "list", "absolute"):
        if len(args) == 1:
            return args[0]
        if not args and isinstance(call.func, ast.Attribute):  # Path(__file__).resolve()
            return again(call.func.value)
    if callee in ("glob", "iglob") and args and len(args[0]) == 1:
        pattern = args[0][0]
        recursive = any(k.arg == "recursive" for k in call.keywords)
        if isinstance(call.func, ast.Attribute) and callee == "glob" and not _is_module(call.func.value, "glob"):
            base = again(call.func.value)  # Path(x).glob("*.cu")
            if len(base) != 1:
                raise _Unknown
            pattern = os.path.join(base[0], pattern)
        if not os.path.realpath(pattern).startswith(os.path.realpath(root)):
            raise _Unknown
        return sorted(globlib.glob(pattern, recursive=recursive))[:2000]
    raise _Unknown


def _is_module(expr: ast.expr, name: str) -> bool:
    return isinstance(expr, ast.Name) and expr.id == name


def _name_value(name: str, scope: ast.AST, base: str, root: str, depth: int) -> list[str]:
    """A name's value in `scope`: its assignment, then `+=`, `.append(x)` and `.extend(xs)` in source order;
    a module-level name when the scope does not assign it."""
    value: list[str] | None = None
    for node in _own_nodes(scope):
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name for t in node.targets):
            value = _evaluate(node.value, scope, base, root, depth + 1)
        elif isinstance(node, ast.AugAssign) and isinstance(node.target, ast.Name) and node.target.id == name \
                and value is not None:
            value = value + _evaluate(node.value, scope, base, root, depth + 1)
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and _is_module(node.func.value, name) \
                and node.func.attr in ("append", "extend") and node.args and value is not None:
            value = value + _evaluate(node.args[0], scope, base, root, depth + 1)
    if value is None:
        module = _MODULE_OF.get(id(scope))
        if module is not None and module is not scope:
            return _name_value(name, module, base, root, depth + 1)
        raise _Unknown
    return value
