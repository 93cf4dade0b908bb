"""A light reader of C++/CUDA sources for the extension inventory: function definitions (`__global__`
kernels among them), the names each body calls, and the Python bindings (`PYBIND11_MODULE` `m.def`,
`TORCH_LIBRARY` `m.def` / `TORCH_LIBRARY_IMPL` `m.impl`). No preprocessor, no parser: comments and
the insides of string and character literals are blanked first (same offsets, newlines kept), so braces
and names in them never count; a binding's name is then read from the original text at the same place.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_CONTROL = {"if", "for", "while", "switch", "catch", "return", "sizeof", "decltype", "defined", "alignof",
            "static_assert", "__launch_bounds__", "operator"}
_SCOPE_HEADER = re.compile(r"\b(namespace|extern|struct|class|union)\b")
_IDENT_BEFORE_PAREN = re.compile(r"([A-Za-z_][\w:]*)\s*(?:<[^<>;{}()]*>)?\s*$")
_CALL = re.compile(r"\b([A-Za-z_]\w*)\s*(?:<[^<>;{}()]{0,160}(?:<[^<>;{}()]{0,80}>[^<>;{}()]{0,80})*>)?\s*(?:\(|<<<)")
_MACRO_ARG = re.compile(r"\b[A-Z][A-Z0-9_]+\s*\(\s*([A-Za-z_]\w*)\s*[,)]")  # DISPATCH_DEVICE_IMPL(roi_align_impl, ...)
# REGISTER_DEVICE_IMPL(roi_align_forward_impl, CUDA, roi_align_forward_cuda): a registry edge key -> implementation
_REGISTRATION = re.compile(r"\bREGISTER_\w*\s*\(\s*([A-Za-z_]\w*)\s*,\s*(CUDA|HIP|GPU)\s*,\s*([A-Za-z_]\w*)\s*\)")
_ADDRESS = re.compile(r"&\s*([A-Za-z_]\w*)\s*<")  # `auto kernel = &fwd_kernel<Traits>;` then `kernel<<<...>>>`
# `#define DEFINE_FLASH_FORWARD_KERNEL(kernelName, ...) ... __global__ void kernelName(...)` (flash-attn): each
# use of the macro before a body defines the kernel its argument names
_DEFINE = re.compile(r"^[ \t]*#[ \t]*define[ \t]+([A-Za-z_]\w*)\(([^)]*)\)((?:[^\n]*\\\n)*[^\n]*)", re.M)
_GLOBAL_NAME = re.compile(r"__global__\b[^;{}()]*?\b([A-Za-z_]\w*)\s*\(")
_MODULE_MACROS = {"PYBIND11_MODULE": "pybind", "TORCH_LIBRARY": "library", "TORCH_LIBRARY_FRAGMENT": "library",
                  "TORCH_LIBRARY_IMPL": "impl"}
_DEF = re.compile(r"\.\s*(def|impl)\s*\(")
_FN_REF = re.compile(r"(?:TORCH_FN\s*\(|&\s*|py::overload_cast<[^>]*>\s*\(\s*&?\s*)?\s*([A-Za-z_][\w:]*)")


@dataclass(frozen=True)
class CppFunction:
    name: str  # unqualified (`ROIAlign_forward_cuda`, not `ops::ROIAlign_forward_cuda`)
    line: int  # 1-based, of the name
    body_lines: int  # lines of code in the body, blank and comment-only lines left out
    is_kernel: bool  # declared `__global__`
    calls: frozenset[str]  # the names the body calls, launches or takes the address of (`f(`, `k<<<`, `&k<T>`)


@dataclass(frozen=True)
class CppBinding:
    name: str  # the Python name: `m.def("roi_align", ...)`, `m.def("nms(Tensor dets, ...) -> Tensor")`
    target: str | None  # the C++ function it calls, when named (`&ROIAlign_forward`, `TORCH_FN(nms_kernel)`)
    kind: str  # "pybind" | "library" | "impl"
    namespace: str  # TORCH_LIBRARY's namespace (`torch.ops.<namespace>.<name>`); "" for pybind
    line: int


_HIDDEN = re.compile(
    r'//[^\n]*|/\*.*?(?:\*/|\Z)|(?<![\w])R"([^()\\ \n]{0,16})\((?:.*?)\)\1"|"(?:\\.|[^"\\\n])*"?|\'(?:\\.|[^\'\\\n])*\'?',
    re.S)


def mask(text: str) -> str:
    """`text` with comments and the contents of string/char literals replaced by spaces (newlines kept)."""
    def blank(match: re.Match[str]) -> str:
        found = match.group(0)
        if found[0] in "\"'R" and len(found) > 1:  # keep the quotes: a literal's place stays visible
            opening = found.index(found[1] if found[0] == "R" else found[0]) + 1
            closing = 1 if len(found) > opening and found[-1] in "\"'" else 0
            return found[:opening] + _spaces(found[opening:len(found) - closing]) + found[len(found) - closing:]
        return _spaces(found)

    return _HIDDEN.sub(blank, text)


def _spaces(text: str) -> str:
    return " " * len(text) if "\n" not in text else "\n".join(" " * len(part) for part in text.split("\n"))


_BRACE = re.compile(r"[{}]")


def brace_pairs(masked: str) -> dict[int, int]:
    """Offset of each `{` -> offset of its `}` (the end of the text when it is never closed)."""
    pairs: dict[int, int] = {}
    stack: list[int] = []
    for match in _BRACE.finditer(masked):
        if match.group(0) == "{":
            stack.append(match.start())
        elif stack:
            pairs[stack.pop()] = match.start()
    for unclosed in stack:
        pairs[unclosed] = len(masked)
    return pairs


def _header_start(masked: str, brace: int, floor: int) -> int:
    """Where the declaration ending at `brace` starts: after the previous `;`, `{` or `}` (or a
    preprocessor line) at this level."""
    k = brace - 1
    while k >= floor and masked[k] not in ";{}":
        k -= 1
    start = k + 1
    lines = masked[start:brace].split("\n")
    kept = 0
    for index, line in enumerate(lines):  # a `#define`/`#include` line above is not part of the header
        if line.lstrip().startswith("#"):
            kept = index + 1
    return start + sum(len(line) + 1 for line in lines[:kept])


def _function_name(header: str) -> str | None:
    """The name of the function a header `... name(args) const` defines; None for anything else."""
    text = header.rstrip()
    text = re.sub(r"(\b(const|noexcept|override|final|mutable)\b\s*)+$", "", text).rstrip()
    text = re.sub(r"->\s*[\w:<>,\s*&]+$", "", text).rstrip()  # trailing return type
    if not text.endswith(")"):
        return None
    depth, k = 0, len(text) - 1
    while k >= 0:
        depth += {")": 1, "(": -1}.get(text[k], 0)
        if depth == 0:
            break
        k -= 1
    found = _IDENT_BEFORE_PAREN.search(text[:k])
    if not found:
        return None
    name = found.group(1).split("::")[-1]
    if name in _CONTROL or "=" in text[:k].split("\n")[-1].split("(")[0]:
        return None
    return name


def functions(text: str, masked: str | None = None) -> list[CppFunction]:
    """Function definitions, at file level or inside namespaces, `extern "C"` blocks and classes."""
    masked = mask(text) if masked is None else masked
    found: list[CppFunction] = []
    _scope(masked, 0, len(masked), found, brace_pairs(masked), _kernel_macros(masked))
    for key, _, impl in _REGISTRATION.findall(masked):  # reached like a call from the dispatching key
        found.append(CppFunction(key, masked.count("\n", 0, masked.find(key)) + 1, 0, False, frozenset({impl})))
    return found


def _kernel_macros(masked: str) -> dict[str, int]:
    """Macros that define a `__global__` kernel named by one of their parameters -> that parameter's index."""
    found: dict[str, int] = {}
    for match in _DEFINE.finditer(masked):
        params = [p.strip() for p in match.group(2).split(",")]
        kernel = _GLOBAL_NAME.search(match.group(3))
        if kernel is not None and kernel.group(1) in params:
            found[match.group(1)] = params.index(kernel.group(1))
    return found


def _macro_kernel(header: str, macro: str, index: int) -> str | None:
    """`DEFINE_X(flash_fwd_kernel, bool A, ...)` -> the argument at `index` when it is a name."""
    use = header[header.rfind(macro):]  # the header may still hold the `#define`'s continued lines
    args = use[use.find("(") + 1:use.rfind(")")].split(",")
    name = args[index].strip() if index < len(args) else ""
    return name if re.fullmatch(r"[A-Za-z_]\w*", name) else None


def _scope(masked: str, start: int, end: int, found: list[CppFunction], pairs: dict[int, int],
           macros: dict[str, int]) -> None:
    k = start
    while k < end:
        brace = masked.find("{", k, end)
        if brace < 0:
            return
        close = pairs[brace]
        header = masked[_header_start(masked, brace, start):brace]
        name = _function_name(header)
        kernel = "__global__" in header
        if name in macros:
            name, kernel = _macro_kernel(header, name, macros[name]), True
        if name is not None and name not in _MODULE_MACROS:
            body = masked[brace + 1:close]
            line = masked.count("\n", 0, brace - len(header) + header.rfind(name)) + 1
            found.append(CppFunction(name, line, sum(1 for raw in body.split("\n") if raw.strip()), kernel,
                                     frozenset(_CALL.findall(body) + _ADDRESS.findall(body) + _MACRO_ARG.findall(body))
                                     - _CONTROL))
        elif name is None and _SCOPE_HEADER.search(header):
            _scope(masked, brace + 1, close, found, pairs, macros)
        k = close + 1


def bindings(text: str, masked: str | None = None) -> list[CppBinding]:
    """The names `PYBIND11_MODULE` and `TORCH_LIBRARY`/`_FRAGMENT`/`_IMPL` blocks give Python."""
    masked = mask(text) if masked is None else masked
    pairs = brace_pairs(masked) if "TORCH_LIBRARY" in masked or "PYBIND11_MODULE" in masked else {}
    out: list[CppBinding] = []
    for macro in re.finditer(r"\b(PYBIND11_MODULE|TORCH_LIBRARY_FRAGMENT|TORCH_LIBRARY_IMPL|TORCH_LIBRARY)\s*\(([^)]*)\)\s*\{",
                             masked):
        kind = _MODULE_MACROS[macro.group(1)]
        namespace = macro.group(2).split(",")[0].strip() if kind != "pybind" else ""
        close = pairs[macro.end() - 1]
        for call in _DEF.finditer(masked, macro.end(), close):
            literal = masked.find('"', call.end(), close)
            if literal < 0 or masked[call.end():literal].strip() not in ("", "TORCH_SELECTIVE_SCHEMA(",
                                                                          "TORCH_SELECTIVE_NAME("):
                continue
            literal_end = masked.find('"', literal + 1, close)
            schema = text[literal + 1:literal_end]
            name = schema.split("(")[0].split(".")[0].split("::")[-1].strip()
            if not re.fullmatch(r"[A-Za-z_]\w*", name):
                continue
            rest = masked[literal_end + 1:close].lstrip()
            if masked[call.end():literal].strip():  # `TORCH_SELECTIVE_SCHEMA("...")`: past its `)`
                rest = rest[1:].lstrip() if rest.startswith(")") else rest
            target = None
            if rest.startswith(","):
                ref = _FN_REF.match(rest[1:].lstrip())
                target = ref.group(1).split("::")[-1] if ref and ref.group(1) not in ("py", "torch") else None
            kind_here = "impl" if call.group(1) == "impl" or kind == "impl" else kind
            out.append(CppBinding(name, target, kind_here, namespace, masked.count("\n", 0, literal) + 1))
    return out


def reached_kernels(start: str, by_name: dict[str, list[CppFunction]], depth: int = 6) -> set[str]:
    """The `__global__` kernels a function reaches through calls (breadth first, at most `depth` calls deep)."""
    kernels: set[str] = set()
    seen = {start}
    frontier = [start]
    for _ in range(depth):
        following: list[str] = []
        for name in frontier:
            for fn in by_name.get(name, ()):
                if fn.is_kernel:
                    kernels.add(fn.name)
                for callee in fn.calls - seen:
                    seen.add(callee)
                    following.append(callee)
        frontier = following
    return kernels
