"""The inventory of a repository's own C++/CUDA extensions, built once per scan before the files are
checked (`engine/runner.py`), only for trees that hold a `.cu`/`.cuh` file.

Per extension (declared in setup.py or by `cpp_extension.load`, `engine/extension_decls.py`): its C++/CUDA
files (the sources it names, the quoted `#include`s they pull in, found by name in the tree; every C++/CUDA
file under the declaring folder where the sources could not be read statically), the `__global__`
kernels in them, its bindings (`PYBIND11_MODULE` / `TORCH_LIBRARY`, `engine/cpp_source.py`) and, per
binding, the kernels it reaches through the C++ calls, a known equivalent (`op_coverage/extension_kernels.yaml`)
and a PyTorch reference in the repository (`def <binding>_ref` / `_torch` / `_pytorch` / `_reference`,
also for the binding's name without `_forward`/`_fwd`/`_backward`/`_bwd`/`_cuda`). The per-file checks
get the result as `ExtensionFacts`; `bench/extension_inventory.py` prints it.
"""

from __future__ import annotations

import ast
import os
import re
import warnings
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from migrator.engine import cpp_source
from migrator.engine.extension_calls import module_name
from migrator.engine.extension_decls import ExtensionDecl, declarations
from migrator.engine.extension_facts import UNREAD, BindingTarget, ExtensionFacts, KernelRoute

CPP_SUFFIXES = (".cu", ".cuh", ".cpp", ".cc", ".cxx", ".h", ".hpp")
MAX_CPP_FILES = 20000
_SKIPPED_DIRS = {".git", ".hg", ".svn", "__pycache__", "node_modules", ".migrate", ".venv", "site-packages",
                 ".tox", ".eggs", "build"}
_VENDORED = {"cutlass", "cub", "thrust", "third_party", "third-party", "3rdparty", "external", "extern", "vendor"}
_INCLUDE = re.compile(r'^[ \t]*#[ \t]*include[ \t]*"([^"]+)"', re.M)
_DEF = re.compile(rb"^[ \t]*def[ \t]+([A-Za-z_]\w*)[ \t]*\(", re.M)
_DECLARES = re.compile(rb"CUDAExtension|CppExtension|cpp_extension")
_STEM_SUFFIXES = re.compile(r"_(forward|backward|fwd|bwd|cuda|kernel|launcher|impl)$")
REFERENCE_SUFFIXES = ("_ref", "_torch", "_pytorch", "_reference")


@dataclass(frozen=True)
class KnownKernel:
    kernel: str
    kind: str  # "equivalent" | "reference"
    use: str
    npu: str
    sources: tuple[str, ...]
    binding: re.Pattern[str]
    module: re.Pattern[str] | None

    def advice(self) -> str:
        return f"{self.use} ({self.kind}; NPU: {self.npu}; source: {self.sources[0]})"


@dataclass(frozen=True)
class Kernel:
    path: str
    name: str
    line: int
    body_lines: int


@dataclass(frozen=True)
class Binding:
    name: str
    module: str  # what Python reaches it through (`pkg._C`, `torch.ops.ns`)
    kernels: tuple[str, ...]
    known: KnownKernel | None
    reference: str  # `path:line` or ""


@dataclass(frozen=True)
class Extension:
    decl: ExtensionDecl
    files: tuple[str, ...]
    kernels: tuple[Kernel, ...]
    bindings: tuple[Binding, ...]

    @property
    def cuda(self) -> bool:
        return bool(self.kernels) or any(f.endswith((".cu", ".cuh")) for f in self.files) or self.decl.cuda


@dataclass(frozen=True)
class Inventory:
    extensions: tuple[Extension, ...]

    def facts(self) -> ExtensionFacts:
        targets: list[BindingTarget] = []
        statuses: dict[tuple[str, str], list[str]] = {}
        for ext in (e for e in self.extensions if e.cuda):
            # any other name called on the module: sources not in the tree or not read, or a name they do not bind
            targets.extend(BindingTarget(m, UNREAD, ext.decl.name, (), bound_to=ext.decl.bound_to,
                                         declared_in=ext.decl.path) for m in _modules(ext, ext.decl.name))
            for b in ext.bindings:
                use = b.known.advice() if b.known and b.known.kind == "equivalent" else ""
                reference = b.reference or (b.known.advice() if b.known and b.known.kind == "reference" else "")
                targets.extend(BindingTarget(m, b.name, ext.decl.name, b.kernels, use, reference, ext.decl.bound_to,
                                             ext.decl.path) for m in _modules(ext, b.module))
                for kernel in ext.kernels:
                    if kernel.name in b.kernels:
                        statuses.setdefault((kernel.path, kernel.name), []).append(_status(b))
        routes = tuple(KernelRoute(path, name, _weakest(found), f"reached by {len(found)} binding(s)")
                       for (path, name), found in sorted(statuses.items()))
        return ExtensionFacts(tuple(targets), routes)


def _modules(ext: Extension, module: str) -> list[str]:
    """What Python reaches `module` through: itself, and a `load()` result imported as `pkg.ops._C`."""
    if ext.decl.bound_to and module == ext.decl.name:
        return [module, f"{module_name(ext.decl.path)}.{ext.decl.bound_to}"]
    return [module]


def _status(b: Binding) -> str:
    if b.known is not None and b.known.kind == "equivalent":
        return "equivalent"
    return "reference" if b.reference or b.known is not None else "port"


def _weakest(statuses: list[str]) -> str:
    return next(s for s in ("port", "reference", "equivalent") if s in statuses)


@lru_cache(maxsize=1)
def known_kernels() -> tuple[KnownKernel, ...]:
    import yaml

    from migrator.ground.resources import data_dir

    path = data_dir("op_coverage") / "extension_kernels.yaml"
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    rows = []
    for index, row in enumerate(data.get("rows", [])):
        missing = {"kernel", "binding", "kind", "use", "npu", "sources"} - set(row)
        if missing or row["kind"] not in ("equivalent", "reference") or not row["sources"]:
            raise ValueError(f"{path}: row {index + 1} ({row.get('kernel')}): missing {sorted(missing)} "
                             "or a kind other than equivalent/reference or no source")
        rows.append(KnownKernel(row["kernel"], row["kind"], row["use"], row["npu"], tuple(row["sources"]),
                                re.compile(row["binding"], re.I),
                                re.compile(row["module"], re.I) if row.get("module") else None))
    return tuple(rows)


def known_for(extension: str, binding: str) -> KnownKernel | None:
    for row in known_kernels():
        if row.binding.search(binding) and (row.module is None or row.module.search(extension)):
            return row
    return None


def build(root: Path, python_files: Iterable[str], overlay: Mapping[str, bytes] | None = None) -> Inventory:
    """The inventory of the tree at `root`; `python_files` are root-relative, `overlay` replaces file bytes."""
    overlay = overlay or {}
    decls: list[ExtensionDecl] = []
    defs: dict[str, str] = {}
    for rel in sorted(python_files):
        data = _read(root, rel, overlay)
        if data is None:
            continue
        for match in _DEF.finditer(data):
            line = data.count(b"\n", 0, match.start()) + 1
            defs.setdefault(match.group(1).decode(), f"{rel}:{line}")
        if _DECLARES.search(data):  # `load` is declared only where `cpp_extension` is named
            decls.extend(_declared(data, rel, root))
    if not decls:
        return Inventory(())
    index = _cpp_index(root)
    parsed: dict[str, _Parsed | None] = {}
    return Inventory(tuple(_extension(d, root, index, parsed, defs, overlay) for d in decls))


def _read(root: Path, rel: str, overlay: Mapping[str, bytes]) -> bytes | None:
    if rel in overlay:
        return overlay[rel]
    from migrator.ground import input_files

    try:
        return input_files.read_bytes(root / rel, input_files.MAX_SOURCE_BYTES, root)
    except OSError:
        return None


def _declared(data: bytes, rel: str, root: Path) -> list[ExtensionDecl]:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            tree = ast.parse(data)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return []  # the file's own scan reports it
    try:
        return declarations(tree, rel, str(root))
    except RecursionError:
        return []


def _cpp_index(root: Path) -> dict[str, list[str]]:
    """Root-relative C++/CUDA files by base name (a walk that follows no link and skips vendored libraries:
    cutlass, cub, third_party... are not the repository's own kernels)."""
    index: dict[str, list[str]] = {}
    count = 0
    for folder, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if d not in _SKIPPED_DIRS and d not in _VENDORED and not d.startswith("."))
        for name in sorted(files):
            if name.endswith(CPP_SUFFIXES) and not os.path.islink(os.path.join(folder, name)):
                rel = os.path.relpath(os.path.join(folder, name), root).replace(os.sep, "/")
                index.setdefault(name, []).append(rel)
                count += 1
                if count >= MAX_CPP_FILES:
                    return index
    return index


@dataclass(frozen=True)
class _Parsed:
    functions: tuple[cpp_source.CppFunction, ...]
    bindings: tuple[cpp_source.CppBinding, ...]
    includes: tuple[str, ...]


def _parse(rel: str, root: Path, parsed: dict[str, _Parsed | None], overlay: Mapping[str, bytes]) -> _Parsed | None:
    if rel not in parsed:
        data = _read(root, rel, overlay)
        if data is None:
            parsed[rel] = None
        else:
            text = data.decode("utf-8", errors="replace")
            masked = cpp_source.mask(text)
            parsed[rel] = _Parsed(tuple(cpp_source.functions(text, masked)), tuple(cpp_source.bindings(text, masked)),
                                  tuple(_INCLUDE.findall(text)))
    return parsed[rel]


def _files_of(decl: ExtensionDecl, root: Path, index: dict[str, list[str]], parsed: dict[str, _Parsed | None],
              overlay: Mapping[str, bytes]) -> list[str]:
    start = [s for s in (_existing(s, root, index) for s in decl.sources) if _VENDORED.isdisjoint(s.split("/"))]
    if decl.partial or not start:
        folder = os.path.dirname(decl.path)
        start += [r for rels in index.values() for r in rels
                  if (not folder or r.startswith(folder + "/")) and r.endswith((".cu", ".cuh", ".cpp", ".cc"))]
    files: list[str] = []
    queue = [s for s in start if _parse(s, root, parsed, overlay) is not None]
    while queue:
        rel = queue.pop(0)
        if rel in files:
            continue
        files.append(rel)
        info = parsed.get(rel)
        for include in info.includes if info else ():
            for candidate in _include_candidates(rel, include, index):
                if candidate not in files and _parse(candidate, root, parsed, overlay) is not None:
                    queue.append(candidate)
    return files


def _existing(source: str, root: Path, index: dict[str, list[str]]) -> str:
    """A named source that is not where setup.py says (an sdist that moved `examples/` into the package):
    the one file of the tree whose path ends with it, else the name as given."""
    if (root / source).is_file():
        return source
    found = [r for r in index.get(os.path.basename(source), []) if r.endswith("/" + source)]
    return found[0] if len(found) == 1 else source


def _include_candidates(including: str, include: str, index: dict[str, list[str]]) -> list[str]:
    """The tree's files a quoted `#include` may mean: beside the including file, else any of that base name
    whose path ends with the include's path (the index holds no vendored library)."""
    beside = os.path.normpath(os.path.join(os.path.dirname(including), include)).replace(os.sep, "/")
    same_name = index.get(os.path.basename(include), [])
    if beside in same_name:
        found = [beside]
    else:
        found = [r for r in same_name if r.endswith(include)][:4]
    return found


def _extension(decl: ExtensionDecl, root: Path, index: dict[str, list[str]], parsed: dict[str, _Parsed | None],
               defs: dict[str, str], overlay: Mapping[str, bytes]) -> Extension:
    files = _files_of(decl, root, index, parsed, overlay)
    by_name: dict[str, list[cpp_source.CppFunction]] = {}
    kernels: list[Kernel] = []
    found: list[cpp_source.CppBinding] = []
    for rel in files:
        info = parsed[rel]
        assert info is not None  # _files_of keeps only parsed files
        for fn in info.functions:
            by_name.setdefault(fn.name, []).append(fn)
            if fn.is_kernel:
                kernels.append(Kernel(rel, fn.name, fn.line, fn.body_lines))
        found.extend(info.bindings)
    impls: dict[tuple[str, str], list[str]] = {}
    for b in found:
        if b.kind == "impl" and b.target:
            impls.setdefault((b.namespace, b.name), []).append(b.target)
    bindings: dict[tuple[str, str], Binding] = {}
    for b in found:
        module = decl.name if b.kind == "pybind" else f"torch.ops.{b.namespace}"
        if b.kind == "impl" and (b.namespace, b.name) in {(x.namespace, x.name) for x in found if x.kind == "library"}:
            continue  # the schema's `m.def` stands for it
        starts = [t for t in (b.target, *impls.get((b.namespace, b.name), ())) if t] or [b.name]
        reached = sorted(set().union(*(cpp_source.reached_kernels(t, by_name) for t in starts)))
        key = (module, b.name)
        if key not in bindings:
            bindings[key] = Binding(b.name, module, tuple(reached), known_for(decl.name, b.name), _reference(b.name, defs))
    return Extension(decl, tuple(files), tuple(kernels), tuple(bindings.values()))


def _reference(binding: str, defs: dict[str, str]) -> str:
    stems = [binding]
    stem = binding
    while (shorter := _STEM_SUFFIXES.sub("", stem)) != stem:
        stems.append(shorter)
        stem = shorter
    for name in stems:
        for suffix in REFERENCE_SUFFIXES:
            if name + suffix in defs:
                return defs[name + suffix]
    return ""
