"""Python call sites of the repository's own CUDA extension bindings (KERN021): `from pkg import _C` then
`_C.roi_align(...)`, `import ext_cuda` then `ext_cuda.fwd(...)`, `from pkg._C import nms`, relative imports
(`from . import _C`), a module bound by `_C = load(name=..., sources=[...])` or by a loader call naming the
extension (`load_ext("_ext", [...])`, `importlib.import_module("pkg._C")`), and `torch.ops.<ns>.<name>`.
Each use of a binding is one site; the message names the extension, the binding, the kernels it reaches
and what to route it to (a known equivalent, a reference in the repository, or a CPU branch beside it).
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator

from migrator.engine.extension_facts import UNREAD, BindingTarget, ExtensionFacts

_LOADERS = ("load", "import_module", "load_ext", "load_extension")
_MENTIONS: dict[int, tuple[ExtensionFacts, re.Pattern[bytes]]] = {}  # by id: the facts of this process's scans


def mentions(facts: ExtensionFacts, data: bytes) -> bool:
    """Whether a file's bytes name any binding (a cheap test before the walk)."""
    known = _MENTIONS.get(id(facts))
    if known is None or known[0] is not facts:
        names = sorted({t.module.rpartition(".")[2] if t.binding == UNREAD else t.binding for t in facts.targets},
                       key=len, reverse=True)
        known = (facts, re.compile(rb"\b(?:" + b"|".join(re.escape(n.encode()) for n in names) + rb")\b"))
        _MENTIONS.clear()
        _MENTIONS[id(facts)] = known
    return known[1].search(data) is not None


def module_name(rel: str) -> str:
    """`pkg/layers/roi.py` -> `pkg.layers.roi`; `pkg/__init__.py` -> `pkg`."""
    parts = rel.removesuffix(".py").split("/")
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _package(rel: str) -> str:
    name = module_name(rel)
    return name if rel.endswith("__init__.py") else name.rpartition(".")[0]


def _absolute(node: ast.ImportFrom, rel: str) -> str:
    if not node.level:
        return node.module or ""
    package = _package(rel).split(".") if _package(rel) else []
    base = package[: len(package) - (node.level - 1)] if node.level > 1 else package
    return ".".join([*base, node.module] if node.module else base)


def _same(dotted: str, wanted: str) -> bool:
    """`proj.pkg._C.nms` is `pkg._C.nms` seen from a root one folder higher."""
    return dotted == wanted or dotted.endswith("." + wanted)


class _Names:
    """What each local name of the module stands for (dotted), from its imports and loader assignments."""

    def __init__(self, tree: ast.Module, rel: str, facts: ExtensionFacts) -> None:
        self.bound: dict[str, str] = {}
        modules = {t.module for t in facts.targets}
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    self.bound[alias.asname or alias.name.split(".")[0]] = alias.name if alias.asname else alias.name.split(".")[0]
            elif isinstance(node, ast.ImportFrom):
                base = _absolute(node, rel)
                for alias in node.names:
                    if alias.name != "*":
                        self.bound[alias.asname or alias.name] = f"{base}.{alias.name}" if base else alias.name
            elif isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
                module = _loaded_module(node.value, node.targets[0].id, rel, facts, modules)
                if module:
                    self.bound[node.targets[0].id] = module

    def dotted(self, node: ast.expr) -> str | None:
        parts: list[str] = []
        while isinstance(node, ast.Attribute):
            parts.append(node.attr)
            node = node.value
        if not isinstance(node, ast.Name) or node.id not in self.bound:
            return None
        return ".".join([self.bound[node.id], *reversed(parts)])


def _loaded_module(value: ast.expr, target: str, rel: str, facts: ExtensionFacts, modules: set[str]) -> str | None:
    if not isinstance(value, ast.Call):
        return None
    func = value.func
    callee = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
    if callee not in _LOADERS:
        return None
    for t in facts.targets:
        if t.bound_to == target and t.declared_in == rel and callee == "load":
            return t.module
    first = value.args[0] if value.args else None
    if isinstance(first, ast.Constant) and isinstance(first.value, str) and first.value:
        for module in modules:
            if module == first.value or module.endswith("." + first.value.lstrip(".")):
                return module
    return None


def may_have_sites(facts: ExtensionFacts, data: bytes) -> bool:
    """Whether a file with these bytes can hold a call site (`extension_sites` is empty otherwise)."""
    return bool(facts.targets) and mentions(facts, data)


def extension_sites(tree: ast.Module, rel: str, facts: ExtensionFacts, data: bytes) -> list[tuple[ast.expr, str, str]]:
    """`call_sites`, for a file that names a binding at all (none without extension facts)."""
    if not may_have_sites(facts, data):
        return []
    return list(call_sites(tree, rel, facts))


def call_sites(tree: ast.Module, rel: str, facts: ExtensionFacts) -> Iterator[tuple[ast.expr, str, str]]:
    """(node, symbol, message) for each use of a binding in the module."""
    names = _Names(tree, rel, facts)
    wanted = {f"{t.module}.{t.binding}": t for t in facts.targets if t.binding != UNREAD}
    unread = [t for t in facts.targets if t.binding == UNREAD]
    parents = {id(child): parent for parent in ast.walk(tree) for child in ast.iter_child_nodes(parent)}
    for node in ast.walk(tree):
        if not isinstance(node, (ast.Attribute, ast.Name)) or not isinstance(node.ctx, ast.Load):
            continue
        dotted = names.dotted(node)
        if dotted is None:
            continue
        target = next((t for key, t in wanted.items() if _same(dotted, key)), None)
        if target is None:  # `ext.fwd` where no binding `fwd` was read: sources absent, unread, or stale Python
            head, _, attr = dotted.rpartition(".")
            module = next((t for t in unread if head and _same(head, t.module)), None)
            if module is None:
                continue
            target = BindingTarget(module.module, attr, module.extension, (), unread=True)
        owner = target.module if target.module.startswith("torch.ops.") else target.extension
        symbol = f"{owner}.{target.binding}"  # one name per binding however it is reached (effort: once each)
        yield node, symbol, message(target, _cuda_branch_fallback(node, parents))


def message(target: BindingTarget, fallback_line: int | None = None) -> str:
    kernels = ", ".join(f"`{k}`" for k in target.kernels) or "not resolved from the C++ sources"
    text = (f"`{target.binding}` is a binding of the repository's CUDA extension `{target.extension}` "
            f"(kernels: {kernels})")
    if target.unread:
        text = (f"`{target.binding}` is called on the repository's CUDA extension `{target.extension}`, but no "
                "binding of that name was read from its C++ sources (not in the tree, not evaluated statically, "
                "or a name they do not bind)")
    routes = []
    if target.use_instead:
        routes.append(f"use instead {target.use_instead}")
    if target.reference and ":" in target.reference and " " not in target.reference:
        routes.append(f"a PyTorch reference exists at {target.reference}: route the NPU path to it")
    elif target.reference:
        routes.append(f"a published PyTorch reference: {target.reference}")
    if fallback_line is not None:
        routes.append(f"the call sits in a CUDA-only branch; the other branch (line {fallback_line}) is the "
                      "fallback: route the NPU path to it")
    if not routes:
        routes.append("no known equivalent or reference: port its kernels (KERN003) or write a PyTorch fallback")
    return text + "; " + "; ".join(routes)


def _cuda_branch_fallback(node: ast.AST, parents: dict[int, ast.AST]) -> int | None:
    """The first line of the other branch when the use sits in one branch of an `if` on `is_cuda` / "cuda"."""
    child, parent = node, parents.get(id(node))
    while parent is not None and not isinstance(parent, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Module)):
        if isinstance(parent, (ast.If, ast.IfExp)) and _tests_cuda(parent.test):
            body = parent.body if isinstance(parent.body, list) else [parent.body]
            orelse = parent.orelse if isinstance(parent.orelse, list) else [parent.orelse]
            if orelse and child in body:
                return orelse[0].lineno
            if body and child in orelse:
                return body[0].lineno
            after = _after_returning_if(parent, parents)
            if after is not None and child in body:
                return after
        child, parent = parent, parents.get(id(parent))
    return None


def _after_returning_if(node: ast.AST, parents: dict[int, ast.AST]) -> int | None:
    """`if x.is_cuda: return ...` with no else: the statement after the `if` is the other branch."""
    if not isinstance(node, ast.If) or node.orelse or not isinstance(node.body[-1], (ast.Return, ast.Raise)):
        return None
    block = getattr(parents.get(id(node)), "body", None)
    if not isinstance(block, list) or node not in block or block.index(node) + 1 >= len(block):
        return None
    return block[block.index(node) + 1].lineno


def _tests_cuda(test: ast.expr) -> bool:
    return any((isinstance(n, ast.Attribute) and n.attr == "is_cuda")
               or (isinstance(n, ast.Constant) and n.value == "cuda") for n in ast.walk(test))
