"""The CUDA build sites of a Python module, found in the scanner's one traversal (`engine/python_checker.py`):
DDP device ids, compiled `*_cuda` modules loaded by name (KERN013), run-time builds (KERN002), parrots'
`Extension(cuda=True)` (KERN001, mmengine's wrappers) and strings naming CUDA sources (KERN023).

They talk to the scanner through its facade (`catalogue.protocols.Checker`): emit by `impl:` name, claim a
node so no later string check reports it, resolve a name.
"""

from __future__ import annotations

import ast
import re

from migrator.catalogue.protocols import Checker

DDP_CALLS = {
    "torch.nn.parallel.DistributedDataParallel",
    "torch.nn.parallel.distributed.DistributedDataParallel",
    "torch.nn.DistributedDataParallel",
}
LOAD_INLINE = {"torch.utils.cpp_extension.load_inline"}
LOAD_EXT = {"torch.utils.cpp_extension.load"}
MODULE_LOADERS = frozenset({"importlib.import_module", "torch.utils.cpp_extension.load"})  # a module by its name
CUDA_EXTENSION_MODULE = re.compile(r"^\w*(_cuda|_cuda_lib|_cuda_ext|cuda_ext)$")
# parrots (SenseTime's framework) builds CUDA with `Extension(..., cuda=True)`, bound directly or as a partial
PARROTS_EXTENSION = "parrots.utils.build_extension.Extension"
PARTIAL = {"functools.partial"}
# the callees `check_call` acts on (each of its sites needs one of these names)
CALLEE_NAMES = frozenset({*DDP_CALLS, *MODULE_LOADERS, *LOAD_INLINE, *LOAD_EXT, PARROTS_EXTENSION, *PARTIAL})
# a whole string naming a CUDA source or a glob of them: "kernel/x.cu", "*.cuh", ".cu", f"{name}.cu"
CUDA_SOURCE_NAME = re.compile(r"[^\s'\"]*\.cuh?")


def check_call(checker: Checker, node: ast.Call, func_names: set[str], kwargs: dict[str, ast.expr]) -> None:
    """The build sites of one call (before its arguments are visited, so a claim keeps them quiet)."""
    if not func_names.isdisjoint(DDP_CALLS):
        for key in ("device_ids", "output_device"):
            if key in kwargs:
                checker.emit("ddp-device-ids", kwargs[key], key)
    if node.args and not func_names.isdisjoint(MODULE_LOADERS):
        first = node.args[0]
        if isinstance(first, ast.Constant) and isinstance(first.value, str) and CUDA_EXTENSION_MODULE.match(first.value):
            checker.claim(first)
            checker.emit("cuda-extension-import", first, first.value)
    _check_builds(checker, node, func_names, kwargs)


def _check_builds(checker: Checker, node: ast.Call, func_names: set[str], kwargs: dict[str, ast.expr]) -> None:
    """Run-time builds (KERN002) and parrots' CUDA extension class (KERN001); the `.cu` strings inside
    such a call go with its finding, which spans the call."""
    if "cuda_sources" in kwargs and not func_names.isdisjoint(LOAD_INLINE):
        checker.emit("cuda-extension-build", node, "load_inline(cuda_sources=...)")
    sources: list[ast.AST] = []
    if not func_names.isdisjoint(LOAD_EXT):
        listed = kwargs.get("sources") or (node.args[1] if len(node.args) > 1 else None)
        sources = [c for c in ast.walk(listed) if _names_cuda_source(c)] if listed is not None else []
        if sources:
            checker.emit("cuda-extension-build", node, "load(sources=[*.cu])")
    if _parrots_cuda_extension(checker, node, func_names, kwargs):
        checker.emit("cuda-extension-class", node, f"{PARROTS_EXTENSION}(cuda=True)")
        sources = [c for arg in (*node.args, *kwargs.values()) for c in ast.walk(arg) if _names_cuda_source(c)]
    for name in sources:  # inside the call's finding (torch's `CUDAExtension` is reported at its name only)
        checker.claim(name)


def check_string(checker: Checker, node: ast.AST, text: str) -> None:
    """A string naming a CUDA source outside a build call: a source list returned by a method, a glob."""
    if ".cu" in text and CUDA_SOURCE_NAME.fullmatch(text):  # the substring first: cheaper than the match
        checker.emit("cuda-source-name", node, text)


def _names_cuda_source(node: ast.AST) -> bool:
    return isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.endswith((".cu", ".cuh"))


def _parrots_cuda_extension(checker: Checker, node: ast.Call, func_names: set[str], kwargs: dict[str, ast.expr]) -> bool:
    """`Extension(name, sources, cuda=True)` or `partial(Extension, cuda=True)` of parrots' build module."""
    cuda = kwargs.get("cuda")
    if not (isinstance(cuda, ast.Constant) and cuda.value is True):
        return False
    if PARROTS_EXTENSION in func_names:
        return True
    return bool(func_names & PARTIAL and node.args and PARROTS_EXTENSION in checker.qualnames(node.args[0]))
