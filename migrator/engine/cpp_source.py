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
_CALL = re.compile(r"\b([A-Za-z_]\w*)\s*(?:<[^<>;{}()]*(?:<[^<>;{}()]*>[^<>;{}()]*)*>)?\s*(?:\(|<<<)")
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
    calls: frozenset[str]  # the names the body calls or launches (`f(`, `k<<<`, `k<T><<<`)


@dataclass(frozen=True)
class CppBinding:
    name: str  # the Python name: `m.def("roi_align", ...)`, `m.def("nms(Tensor dets, ...) -> Tensor")`
    target: str | None  # the C++ function it calls, when named (`&ROIAlign_forward`, `TORCH_FN(nms_kernel)`)
    kind: str  # "pybind" | "library" | "impl"
    namespace: str  # TORCH_LIBRARY's namespace (`torch.ops.<namespace>.<name>`); "" for pybind
    line: int


def mask(text: str) -> str:
    """`text` with comments and the contents of string/char literals replaced by spaces (newlines kept)."""
    out = list(text)
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c == "/" and text.startswith("//", i):
            end = text.find("\n", i)
            end = n if end < 0 else end
            _blank(out, i, end)
            i = end
        elif c == "/" and text.startswith("/*", i):
            end = text.find("*/", i + 2)
            end = n if end < 0 else end + 2
            _blank(out, i, end)
            i = end
        elif c == "R" and text.startswith('R"', i) and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_")):
            open_paren = text.find("(", i + 2)
            delim = text[i + 2:open_paren] if open_paren >= 0 else ""
            end = text.find(")" + delim + '"', open_paren) if open_paren >= 0 and len(delim) <= 16 else -1
            end = n if end < 0 else end + len(delim) + 2
            _blank(out, i + 1, end)
            i = end
        elif c in "\"'":
            j = i + 1
            while j < n and text[j] != c and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            _blank(out, i + 1, min(j, n))
            i = j + 1
        else:
            i += 1
    return "".join(out)


def _blank(out: list[str], start: int, end: int) -> None:
    for k in range(start, min(end, len(out))):
        if out[k] != "\n":
            out[k] = " "


def _match_brace(masked: str, open_at: int) -> int:
    """Offset of the `}` closing the `{` at `open_at` (the end of the text when it is never closed)."""
    depth = 0
    for k in range(open_at, len(masked)):
        ch = masked[k]
        if ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
            if depth == 0:
                return k
    return len(masked)


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
    _scope(masked, 0, len(masked), found)
    return found


def _scope(masked: str, start: int, end: int, found: list[CppFunction]) -> None:
    k = start
    while k < end:
        brace = masked.find("{", k, end)
        if brace < 0:
            return
        close = _match_brace(masked, brace)
        header = masked[_header_start(masked, brace, start):brace]
        name = _function_name(header)
        if name is not None and name not in _MODULE_MACROS:
            body = masked[brace + 1:close]
            line = masked.count("\n", 0, brace - len(header) + header.rfind(name)) + 1
            found.append(CppFunction(name, line, sum(1 for raw in body.split("\n") if raw.strip()),
                                     "__global__" in header, frozenset(_CALL.findall(body)) - _CONTROL))
        elif name is None and _SCOPE_HEADER.search(header):
            _scope(masked, brace + 1, close, found)
        k = close + 1


def bindings(text: str, masked: str | None = None) -> list[CppBinding]:
    """The names `PYBIND11_MODULE` and `TORCH_LIBRARY`/`_FRAGMENT`/`_IMPL` blocks give Python."""
    masked = mask(text) if masked is None else masked
    out: list[CppBinding] = []
    for macro in re.finditer(r"\b(PYBIND11_MODULE|TORCH_LIBRARY_FRAGMENT|TORCH_LIBRARY_IMPL|TORCH_LIBRARY)\s*\(([^)]*)\)\s*\{",
                             masked):
        kind = _MODULE_MACROS[macro.group(1)]
        namespace = macro.group(2).split(",")[0].strip() if kind != "pybind" else ""
        close = _match_brace(masked, macro.end() - 1)
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
