"""The ATen layer: which overloads torch-npu has a kernel for (its codegen yaml) and how torch's
`native_functions.yaml` classifies the rest (ascend-facts section f)."""

from __future__ import annotations

from dataclasses import dataclass, field

from migrator.catalogue.coverage._names import (
    aten_candidates,
    index_by_base,
    is_non_op_name,
    normalize_name,
    pick_overload,
)
from op_coverage.facts import GenerationError, op_name_of, yaml_load


@dataclass
class CodegenInfo:
    npu_ops: set = field(default_factory=set)  # "name.overload" with an NPU kernel
    custom: dict = field(default_factory=dict)  # base -> {"schemas": {op: schema}, "exposed", "tags"}
    section_counts: dict = field(default_factory=dict)


def parse_codegen_yaml(text: str) -> CodegenInfo:
    data = yaml_load(text) or {}
    if not isinstance(data, dict) or "supported" not in data:
        raise GenerationError("npu_native_functions_by_codegen.yaml: no 'supported' section")
    info = CodegenInfo()
    for section in ("supported", "symint", "autograd", "quant", "custom"):
        entries = data.get(section) or []
        info.section_counts[section] = len(entries)
        for entry in entries:
            info.npu_ops.add(op_name_of(entry))
    for entry in data.get("custom") or []:
        op = op_name_of(entry)
        base = op.split(".", 1)[0]
        rec = info.custom.setdefault(base, {"schemas": {}, "exposed": False, "tags": set()})
        if isinstance(entry, dict):
            rec["schemas"].setdefault(op, str(entry["func"]).strip())
            if entry.get("exposed"):
                rec["exposed"] = True
            tags = entry.get("tags")
            if isinstance(tags, str):
                rec["tags"].update(t.strip() for t in tags.split(",") if t.strip())
            elif isinstance(tags, list):
                rec["tags"].update(str(t) for t in tags)
    return info


@dataclass
class AtenInfo:
    overloads: dict = field(default_factory=dict)  # "name.overload" -> kernel class
    base_kernel: dict = field(default_factory=dict)  # base -> (kernel class, chosen overload)
    bindings: dict = field(default_factory=dict)  # public python name -> aten base


def classify_overload(entry: dict, npu_ops: set) -> str:
    """The recipe of ascend-facts section (f) step 2."""
    name = op_name_of(entry)
    if name in npu_ops:
        return "npu_kernel"
    delegate = entry.get("structured_delegate")
    if delegate and str(delegate).strip() in npu_ops:
        return "npu_kernel_via_delegate"
    dispatch = entry.get("dispatch") or {}
    keys: set[str] = set()
    for key in dispatch:
        keys.update(k.strip() for k in str(key).split(","))
    if "CompositeImplicitAutograd" in keys or (not dispatch and not delegate):
        return "decomposes"
    if keys & {"CompositeExplicitAutograd", "CompositeExplicitAutogradNonFunctional"}:
        return "composite_explicit"
    return "cpu_fallback"


_PY_MODULES = {"special": "special_", "linalg": "linalg_", "fft": "fft_", "nested": "nested_", "sparse": "sparse_"}


def parse_native_functions(text: str, npu_ops: set) -> AtenInfo:
    entries = yaml_load(text) or []
    if not isinstance(entries, list) or not entries:
        raise GenerationError("native_functions.yaml: expected a list of '- func:' entries")
    info = AtenInfo()
    for entry in entries:
        if not isinstance(entry, dict) or "func" not in entry:
            continue
        op = op_name_of(entry)
        info.overloads[op] = classify_overload(entry, npu_ops)
        base = op.split(".", 1)[0]
        # python bindings
        if base.startswith("_"):
            continue
        module = entry.get("python_module")
        variants = {v.strip() for v in str(entry.get("variants", "function")).split(",")}
        if module == "nn":
            continue
        if module in _PY_MODULES:
            prefix = _PY_MODULES[module]
            if base.startswith(prefix) and "function" in variants:
                info.bindings.setdefault(f"torch.{module}.{base[len(prefix):]}", base)
            continue
        if module:
            continue
        if "function" in variants:
            info.bindings.setdefault(f"torch.{base}", base)
        if "method" in variants:
            info.bindings.setdefault(f"torch.Tensor.{base}", base)
    for base, overloads in index_by_base(info.overloads).items():
        info.base_kernel[base] = pick_overload(base, overloads)
    return info


def kernel_for(name: str, aten: AtenInfo) -> tuple[str, str | None]:
    """(kernel class, ATen op) for a public API name, via the shared heuristic mapping."""
    for candidate in aten_candidates(name):
        if candidate in aten.overloads and "." in candidate:
            return aten.overloads[candidate], candidate
        if candidate in aten.base_kernel:
            return aten.base_kernel[candidate]
    if is_non_op_name(normalize_name(name)):
        return "none", None
    return "unknown", None


