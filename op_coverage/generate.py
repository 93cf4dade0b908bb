#!/usr/bin/env python3
"""Generate the op-coverage table ``op_coverage/torch_npu-<version>.json``.

Deterministic and offline once the pinned torch-npu wheel is in the cache::

    python op_coverage/generate.py            # downloads the wheel once (pip), then offline
    python op_coverage/generate.py --check    # exit 1 if the committed table is stale

Inputs (every one is pinned by sha256 and recorded in the table header):

* the torch-npu 2.14.0 wheel, read as a zip (never installed, never imported):
  ``torch_npu/csrc/aten/npu_native_functions_by_codegen.yaml`` (ATen overloads with an NPU
  kernel, custom-op schemas), ``utils/exposed_api.py`` (public custom ops),
  ``npu/__init__.py`` ``__all__`` and ``contrib/transfer_to_npu.py`` (CUDA -> NPU names),
  ``_op_plugin_docs.py`` (products per custom op), ``optim/*.py`` (fused optimizers);
* torch 2.13.0's ``torchgen/packaged/ATen/native/native_functions.yaml`` and
  ``torch/cuda/__init__.py`` (read as text from the installed torch; torch is not imported);
* the Ascend/pytorch native-API support docs (``pytorch_2-13-0/*.md``) and Ascend/op-plugin
  ``derivatives.yaml`` from the shared data snapshot (``--shared-data``, default
  ``../shared/data`` relative to the repository root), checked against its ``SOURCES.md``.

The table keeps facts only (status per SoC, dtype sets, flags, NPU names, short English
limit summaries); the Chinese documentation prose is never copied. See op_coverage/README.md.
"""

from __future__ import annotations

import argparse
import ast
import hashlib
import json
import os
import re
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import yaml

REPO_ROOT = Path(__file__).resolve().parent.parent
if str(REPO_ROOT) not in sys.path:  # the generator shares name helpers with the loader
    sys.path.insert(0, str(REPO_ROOT))

from migrator.coverage._names import (  # noqa: E402
    DTYPES,
    aten_candidates,
    index_by_base,
    is_non_op_name,
    normalize_dtype,
    normalize_name,
    pick_overload,
)

GENERATOR_VERSION = "1.0.0"
FORMAT_VERSION = 1

TORCH_NPU_VERSION = "2.14.0"
WHEEL_FILE = "torch_npu-2.14.0-cp311-cp311-manylinux_2_28_x86_64.whl"
WHEEL_SHA256 = "7736f7d82cf9f16c7dfc4537f7e7c638153da760273a193455e70857f912189e"
WHEEL_PIP_ARGS = (
    "--no-deps",
    "--only-binary=:all:",
    "--python-version",
    "3.11",
    "--platform",
    "manylinux_2_28_x86_64",
    "torch-npu==2.14.0",
)
DEFAULT_WHEEL_CACHE = Path.home() / ".cache" / "ascend-migrate" / "wheels"

TORCH_VERSION = "2.13.0"
NATIVE_FUNCTIONS_REL = "torchgen/packaged/ATen/native/native_functions.yaml"
TORCH_CUDA_INIT_REL = "torch/cuda/__init__.py"
TORCH_PINNED_SHA256 = {
    NATIVE_FUNCTIONS_REL: "63bd04646fa7ee7a496a8f3095204ae0c8cfcde5b1282789ea92f9faa713491c",
    TORCH_CUDA_INIT_REL: "0dd55462968d927ea2dc58da0401688b151354c448c097b12c6e4e0560a66541",
}

DOCS_DIR = "ascend-pytorch/native_api/pytorch_2-13-0"
DOCS_LICENSE = "ascend-pytorch/native_api/LICENSE"
DERIVATIVES_FILE = "ascend-op-plugin/derivatives.yaml"

#: The wheel members the table is built from.
WHEEL_CODEGEN = "torch_npu/csrc/aten/npu_native_functions_by_codegen.yaml"
WHEEL_EXPOSED = "torch_npu/utils/exposed_api.py"
WHEEL_NPU_INIT = "torch_npu/npu/__init__.py"
WHEEL_TRANSFER = "torch_npu/contrib/transfer_to_npu.py"
WHEEL_OP_DOCS = "torch_npu/_op_plugin_docs.py"
WHEEL_OPTIM_INIT = "torch_npu/optim/__init__.py"

SOCS = ("A2", "A3", "950DT")
SOC_TITLES = {
    "A2": "Atlas A2 training series",
    "A3": "Atlas A3 training series",
    "950DT": "Ascend 950DT",
}
_SOC_TERMS = {
    "Atlas A2 训练系列产品": "A2",
    "Atlas A3 训练系列产品": "A3",
    "Ascend 950DT": "950DT",
}

STATUSES = ("supported", "partial", "unsupported", "cpu_fallback", "unverified")
KERNELS = (
    "npu_kernel",
    "npu_kernel_via_delegate",
    "decomposes",
    "composite_explicit",
    "cpu_fallback",
    "none",
    "unknown",
)
#: ATen-layer classes under which the op runs on the NPU (directly or after decomposition).
KERNEL_RUNS_ON_NPU = ("npu_kernel", "npu_kernel_via_delegate", "decomposes", "composite_explicit")

FLAGS = {
    "autograd": "custom op with a backward formula in op-plugin derivatives.yaml",
    "compat_impl": "torch_npu.npu.use_compatible_impl(True) switches to a PyTorch-compatible implementation",
    "cpu_fallback": "may run on the CPU (docs say so, or the ATen op has no NPU kernel)",
    "cpu_only": "docs: CPU tensors only",
    "device_rule": "transfer_to_npu rewrites cuda device arguments of this callable to npu",
    "doc_dtype_ignored": "a dtype list the docs attach to a non-tensor API (copy-paste) was ignored",
    "doc_kernel_conflict": "docs mark it unsupported although its ATen op has an NPU kernel (docs win)",
    "hccl_rule": "transfer_to_npu rewrites 'nccl' to 'hccl' in its backend arguments",
    "inference_only": "docs: inference only, training not supported",
    "nondeterministic_seeded": "custom op tagged nondeterministic_seeded (uses the RNG)",
    "npu_native": "an NPU-side API shipped by torch_npu (target of a migration, not a CUDA API)",
    "precision_change": "transfer_to_npu rebinds it to a lower-precision type",
    "precision_differs": "docs: results may differ in precision (on the SoC the flag is attached to)",
    "public": "listed in torch_npu.__all__ (utils/exposed_api.py) or exposed in the codegen yaml",
    "transfer_to_npu": "torch_npu.contrib.transfer_to_npu maps this name automatically",
}

#: Non-tensor APIs on which the docs carry copy-pasted dtype limits ("`input` fp32 only" on a
#: flag, "`self` fp32 only" on a Module method): dtype-only limits there are ignored.
DTYPE_COPY_PASTE_PREFIXES = (
    "torch.backends.",
    "torch.nn.Module",
    "torch.nn.ModuleList",
    "torch.nn.ModuleDict",
    "torch.nn.ParameterList",
    "torch.nn.ParameterDict",
    "torch.nn.Sequential",
    "torch.nn.parameter.",
)

#: torch-npu <-> torch pairing (newest torch-npu release per torch release; PyPI Requires-Dist).
TORCH_PAIRINGS = (
    ("2.14.0", "2.14.0", "torch==2.14.0.*"),
    ("2.13.0", "2.13.0", "torch==2.13.0.*"),
    ("2.12.0", "2.12.0.post3", "torch==2.12.0"),
    ("2.11.0", "2.11.0.post3", "torch==2.11.0+cpu"),
    ("2.10.0", "2.10.0.post7", "torch==2.10.0+cpu"),
    ("2.9.1", "2.9.1", "torch==2.9.1+cpu"),
    ("2.9.0", "2.9.0.post9", "torch==2.9.0+cpu"),
    ("2.8.0", "2.8.0.post5", "torch==2.8.0+cpu"),
    ("2.7.1", "2.7.1.post11", "torch==2.7.1+cpu"),
)
TORCH_PAIRINGS_SOURCE = (
    "PyPI torch-npu wheel metadata (Requires-Dist of the cp311 manylinux_2_28_x86_64 wheels); "
    "shared/docs/ascend-facts.md section (a). A '+cpu' pin is not resolvable from PyPI alone: "
    "install torch-npu with --no-deps."
)

_CJK = re.compile(r"[\u2e80-\u9fff\u3000-\u303f\uff00-\uffef]")


class GenerationError(RuntimeError):
    """An input is missing, unpinned or malformed; the message says what to do."""


# --------------------------------------------------------------------------------------------
# small helpers


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def _yaml_load(text: str):
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    return yaml.load(text, Loader=loader)


def op_name_of(entry) -> str:
    """``"abs.out(Tensor self, ...) -> Tensor"`` / ``{"func": ...}`` / ``"abs"`` -> ``"abs.out"``."""
    text = entry["func"] if isinstance(entry, dict) else entry
    return str(text).split("(", 1)[0].strip()


def _sorted_dtypes(values: Iterable[str]) -> list[str]:
    order = {d: i for i, d in enumerate(DTYPES)}
    return sorted(set(values), key=lambda d: (order.get(d, len(order)), d))


def _has_cjk(text: str) -> bool:
    return bool(_CJK.search(text))


# --------------------------------------------------------------------------------------------
# 1. torch-npu codegen yaml


@dataclass
class CodegenInfo:
    npu_ops: set = field(default_factory=set)  # "name.overload" with an NPU kernel
    custom: dict = field(default_factory=dict)  # base -> {"schemas": {op: schema}, "exposed", "tags"}
    section_counts: dict = field(default_factory=dict)


def parse_codegen_yaml(text: str) -> CodegenInfo:
    data = _yaml_load(text) or {}
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


# --------------------------------------------------------------------------------------------
# 2. torch native_functions.yaml


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
    entries = _yaml_load(text) or []
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


# --------------------------------------------------------------------------------------------
# 3. Ascend native-API docs (markdown)


@dataclass
class DocRow:
    name: str
    file: str
    npu_name: str | None
    support: dict  # soc -> bool (only SoCs present in the table)
    limit_lines: list


_MARKER = re.compile(r"(?m)^\*\*原生文档\*\*")
_BLOCK_END = re.compile(r"(?m)^(?:#{1,6}\s|>\s*<font)")
_ANCHOR = re.compile(r"^[：:]\s*\[([^\]]+)\]")
_NPU_FORM = re.compile(r"(?m)^\*\*NPU\s*形式名称\*\*\s*[：:]\s*`?([^`\s]+)`?")
_TABLE_ROW = re.compile(r"(?m)^\|\s*<term>([^<]+)</term>\s*\|\s*([^|]*?)\s*\|")
_LIMITS = "**限制与说明**"
_YES = {"✔", "&#10004;", "√", "✓"}
_NO = {"✘", "&#10008;", "×", "✗", "x"}


def parse_docs_md(text: str, filename: str) -> list[DocRow]:
    """Split a native-API page on its ``**原生文档**`` markers (the reliable anchor)."""
    rows: list[DocRow] = []
    chunks = _MARKER.split(text)
    for chunk in chunks[1:]:
        end = _BLOCK_END.search(chunk)
        body = chunk[: end.start()] if end else chunk
        anchor = _ANCHOR.match(body)
        if not anchor:
            continue
        name = normalize_name(anchor.group(1))
        npu = _NPU_FORM.search(body)
        support: dict[str, bool] = {}
        for term, mark in _TABLE_ROW.findall(body):
            soc = _SOC_TERMS.get(term.strip())
            if soc is None:
                continue
            mark = mark.strip()
            if mark in _YES:
                support[soc] = True
            elif mark in _NO:
                support[soc] = False
        limits_at = body.find(_LIMITS)
        lines = extract_limit_lines(body[limits_at + len(_LIMITS):]) if limits_at >= 0 else []
        rows.append(DocRow(name, filename, npu.group(1) if npu else None, support, lines))
    return rows


def extract_limit_lines(raw: str) -> list[str]:
    """Bullet lines of a limits section, without code blocks, HTML and example code."""
    raw = re.sub(r"```.*?```", "\n", raw, flags=re.S)
    lines: list[str] = []
    first = True
    for line in raw.splitlines():
        text = line.strip()
        if first and text[:1] in ("：", ":"):
            text = text[1:].strip()
            first = False
            if text:
                lines.append(text)
            continue
        if not text or text.startswith("<") or text == "...":
            continue
        first = False
        if text.startswith("- ") or text.startswith("-"):
            text = text.lstrip("-").strip()
            if text:
                lines.append(text)
        elif re.match(r"^\d+\.\s", text):
            lines.append(text)
    return lines


# -- limit translation -----------------------------------------------------------------------

_DT = r"(?:bf16|fp16|fp32|fp64|fp8|uint8|uint16|int8|int16|int32|int64|bool|complex64|complex128|double)"
_DTLIST = rf"{_DT}(?:\s*[，,、和]\s*{_DT})*"
_SOC_PREFIX = re.compile(r"^((?:<term>[^<]+</term>\s*[、/，,]?\s*)+)[：:]?\s*(.*)$")
_SOC_TARGET = re.compile(r"^针对<term>([^<]+)</term>\s*[，,]\s*(.*)$")


def _dt_list(text: str) -> list[str]:
    out = []
    for token in re.findall(_DT, text):
        norm = normalize_dtype(token)
        if norm:
            out.append(norm)
    return _sorted_dtypes(out)


def _fmt_value(value: str) -> str:
    value = value.strip().strip("`").strip('"').strip("'")
    if re.fullmatch(r"-?\d+(\.\d+)?|True|False|None|\(.*\)|\[.*\]", value) or value.startswith("torch."):
        return value
    return f"'{value}'"


def _alts(text: str) -> str:
    parts = [p for p in re.split(r"\s*(?:或|和|、)\s*", text.strip().strip("。")) if p]
    return " or ".join(_fmt_value(p) for p in parts)


@dataclass
class LimitInfo:
    dtypes: dict = field(default_factory=dict)  # soc -> list (primary tensor argument)
    param: dict = field(default_factory=dict)  # soc -> name of the argument the dtype list is for
    excluded: dict = field(default_factory=dict)  # soc -> set
    added: dict = field(default_factory=dict)  # soc -> set
    flags: dict = field(default_factory=dict)  # soc -> set
    fragments: dict = field(default_factory=dict)  # soc -> list of English fragments
    untranslated: dict = field(default_factory=dict)  # soc -> int
    applies: dict = field(default_factory=dict)  # soc -> bool (any limit line for that SoC)
    dtype_only: dict = field(default_factory=dict)  # soc -> bool (all lines are dtype lists)
    npu_name: str | None = None


# (pattern, handler). Handlers return a list of actions; patterns are tried in order with
# re.search on the line (after any SoC prefix). An action is a tuple:
#   ("dtypes", param, [dtypes]) ("exclude", [dtypes]) ("add", [dtypes]) ("flag", name)
#   ("frag", english) ("npu", name) ("ignore",)
def _rx(pattern: str) -> re.Pattern:
    return re.compile(pattern)


_RULES: list[tuple[re.Pattern, Callable[[re.Match], list]]] = [
    (_rx(rf"^((?:`[\w.\"]+`\s*[、，,]?\s*)+)仅支持({_DTLIST})(?:[，,]\s*不支持(?:{_DTLIST})(?:数据类型)?)?(?:取值范围\[[-\d,]+\])?(?:。.*)?$"),
     lambda m: [("dtypes", re.findall(r"`([^`]+)`", m.group(1))[0].strip('"'), _dt_list(m.group(2)))]),
    (_rx(rf"^输入((?:`[\w.]+`\s*[、，,]?\s*)+)的数据类型为({_DTLIST})$"),
     lambda m: [("dtypes", re.findall(r"`([^`]+)`", m.group(1))[0], _dt_list(m.group(2)))]),
    (_rx(r"^`(\w+)`维度需与`(\w+)`维度一致$|^`(\w+)`的维度数需与`(\w+)`的维度数一致$"),
     lambda m: [("frag", f"{m.group(1) or m.group(3)} must have as many dims as {m.group(2) or m.group(4)}")]),
    (_rx(r"^两个输入的shape要保持一致$"), lambda m: [("frag", "both inputs must have the same shape")]),
    (_rx(r"^`(\w+)`参数值不能超过int32的最大值$"), lambda m: [("frag", f"{m.group(1)} must fit in int32")]),
    (_rx(rf"^(?:在)?({_DTLIST})类型下?不支持三个`tensor`同时广播$"),
     lambda m: [("frag", f"{', '.join(_dt_list(m.group(1)))}: broadcasting all three tensors not supported")]),
    (_rx(r"^`eps`取值大于1时输出为nan，`eps`取值为1时输出为inf$"), lambda m: [("frag", "eps > 1 gives NaN and eps = 1 gives inf")]),
    (_rx(rf"^带`(\w+)`场景不支持({_DTLIST})$"), lambda m: [("frag", f"{', '.join(_dt_list(m.group(2)))} not supported with {m.group(1)}")]),
    (_rx(r"^取值范围\[(-?\d+),\s*(-?\d+)\]$"), lambda m: [("frag", f"values must lie in [{m.group(1)}, {m.group(2)}]")]),
    (_rx(r"^输入范围为(\d+)-(\d+)$"), lambda m: [("frag", f"valid range {m.group(1)}-{m.group(2)}")]),
    (_rx(r"^`(\w+)`需小于等于(\d+)$"), lambda m: [("frag", f"{m.group(1)} <= {m.group(2)}")]),
    (_rx(r"^输入`tensor`的元素个数不能超过10万$"), lambda m: [("frag", "at most 100000 elements")]),
    (_rx(r"^目标序列的长度不支持0"), lambda m: [("frag", "target_lengths must not contain 0")]),
    (_rx(rf"^不支持({_DTLIST}|{_DT}(?:\s*,\s*{_DT})*)(?:数据类型|类型)?$"), lambda m: [("exclude", _dt_list(m.group(1)))]),
    (_rx(rf"^额外支持({_DTLIST})$"), lambda m: [("add", _dt_list(m.group(1)))]),
    (_rx(r"^支持Named Tensor$"), lambda m: [("ignore",)]),
    (_rx(r"可能回退至CPU执行"), lambda m: [("flag", "cpu_fallback"), ("frag", "may fall back to CPU execution")]),
    (_rx(r"^回退至CPU执行$"), lambda m: [("flag", "cpu_fallback"), ("frag", "falls back to CPU execution")]),
    (_rx(r"^仅CPU支持$"), lambda m: [("flag", "cpu_only"), ("frag", "CPU tensors only")]),
    (_rx(r"仅支持推理"), lambda m: [("flag", "inference_only"), ("frag", "inference only, training not supported")]),
    (_rx(r"use_compatible_impl"),
     lambda m: [("flag", "compat_impl"), ("frag", "torch_npu.npu.use_compatible_impl(True) selects the PyTorch-compatible implementation")]),
    (_rx(r"精度可能和.*存在差异|精度可能存在差异"), lambda m: [("flag", "precision_differs"), ("frag", "precision may differ from Atlas A2/A3")]),
    (_rx(r"精度(?:累加)?误差|精度会有损失|结果可能存在(?:精度)?误差"), lambda m: [("flag", "precision_differs"), ("frag", "results may differ in precision")]),
    (_rx(r"NPU(?:形式名称为|对应接口为)`([^`]+)`"), lambda m: [("npu", m.group(1))]),
    (_rx(r"^建议使用已适配的`([^`]+)`$"), lambda m: [("npu", m.group(1)), ("frag", f"use {m.group(1)}")]),
    (_rx(r"^`(\w+)`参数仅支持设置为`([^`]+)`$"), lambda m: [("frag", f"{m.group(1)}={_fmt_value(m.group(2))} only")]),
    (_rx(r"^(?:当前)?`\"?(\w+)\"?`参数仅支持(\w+)$"), lambda m: [("frag", f"{m.group(1)}={_fmt_value(m.group(2))} only")]),
    (_rx(r"^由于底层实现限制，`\"?(\w+)\"?`仅支持(True|False)"), lambda m: [("frag", f"{m.group(1)}={m.group(2)} only")]),
    (_rx(r"^`(\w+)`(?:参数|的值)?(?:目前)?(?:在NPU上)?仅支持(?:设置为|传入)?([\w().,\[\] ]+?(?:(?:或|和)[\w().,\[\] ]+)*)$"),
     lambda m: [("frag", f"{m.group(1)}={_alts(m.group(2))} only")]),
    (_rx(r"^当前NPU设备仅支持设置`(\w+)`为([\w.]+)或([\w.]+)$"),
     lambda m: [("frag", f"{m.group(1)}={m.group(2)} or {m.group(3)} only")]),
    (_rx(r"^(?:属性)?`(\w+)`仅支持非负值(，不支持nan)?$"), lambda m: [("frag", f"{m.group(1)} must be non-negative")]),
    (_rx(r"^仅支持`(\w+)`大于等于0$"), lambda m: [("frag", f"{m.group(1)} must be non-negative")]),
    (_rx(r"^`(\w+)`参数需大于(\d+)$"), lambda m: [("frag", f"{m.group(1)} must be > {m.group(2)}")]),
    (_rx(r"^不支持`([^`]+)`(?:参数)$"), lambda m: [("frag", f"{m.group(1)} argument not supported")]),
    (_rx(r"^不支持`([^`]+)`(?:的)?(?:场景)?$"), lambda m: [("frag", f"{m.group(1)} not supported")]),
    (_rx(r"^(?:入参|当前)?`(\w+)`不支持(?:求导|反向计算)$"), lambda m: [("frag", f"{m.group(1)} is not differentiable")]),
    (_rx(r"^不支持`dtype`参数$"), lambda m: [("frag", "dtype argument not supported")]),
    (_rx(r"^输入最大支持(\d+)维$"), lambda m: [("frag", f"at most {m.group(1)} input dims")]),
    (_rx(r"^不支持(\d+)维度及以上输入$"), lambda m: [("frag", f"inputs with {m.group(1)} or more dims not supported")]),
    (_rx(r"^不支持(\d+)维度的shape$"), lambda m: [("frag", f"{m.group(1)}-dim shapes not supported")]),
    (_rx(r"^(?:`input`)?(?:仅|只)?支持(\d+)-(\d+)维"), lambda m: [("frag", f"{m.group(1)}-{m.group(2)} dims only")]),
    (_rx(r"^该API仅支持(\d+)维及以上的输入`input`$"), lambda m: [("frag", f"input needs at least {m.group(1)} dims")]),
    (_rx(r"^入参`(\w+)`不支持(\d+)维$"), lambda m: [("frag", f"{m.group(2)}-dim {m.group(1)} not supported")]),
    (_rx(r"^不支持稀疏张量$"), lambda m: [("frag", "sparse tensors not supported")]),
    (_rx(r"^依赖稀疏`tensor`$"), lambda m: [("frag", "depends on sparse tensors")]),
    (_rx(r"^(?:`input`)?不支持标量`tensor`$"), lambda m: [("frag", "scalar tensors not supported")]),
    (_rx(r"^不支持nan场景$"), lambda m: [("frag", "NaN inputs not supported")]),
    (_rx(r"^不支持变长序列输入$"), lambda m: [("frag", "variable-length sequences not supported")]),
    (_rx(r"^目前嵌套张量只支持创建"), lambda m: [("frag", "nested tensors can only be created, no other operations")]),
    (_rx(r"^需通过`torch.compile`获取SymInt$"), lambda m: [("frag", "SymInt only obtainable through torch.compile")]),
    (_rx(r"^未设置`device`时.*隐式地初始化"), lambda m: [("frag", "implicitly initialises the current device (default 0) when none is set")]),
    (_rx(r"暂不支持double类型.*默认返回fp32"), lambda m: [("exclude", ["fp64"]), ("frag", "returns fp32 where fp64 is requested")]),
    (_rx(r"^不支持double数据类型$"), lambda m: [("exclude", ["fp64"])]),
    (_rx(r"不再支持对bool类型数据进行处理"), lambda m: [("exclude", ["bool"]), ("frag", "bool input not supported")]),
    (_rx(r"启动`foreach`的情况下.*性能下降"),
     lambda m: [("frag", "foreach can be slow with many parameter groups; consider foreach=False")]),
    (_rx(r"启动`fused`的情况下.*不支持`grad_scale`和`found_inf`"),
     lambda m: [("frag", "fused=True does not accept grad_scale/found_inf; fp16/bf16 are computed with up-casting")]),
    (_rx(r"^`backend`可支持npugraphs"), lambda m: [("frag", "backend='npugraphs' is the counterpart of 'cudagraphs'")]),
    (_rx(r"“`use_device`”需设置为“npu”"), lambda m: [("frag", "set use_device='npu' to profile NPU activity")]),
    (_rx(r"TORCH_NPU_DEVICE_CAPABILITY"),
     lambda m: [("frag", "returns the value of env TORCH_NPU_DEVICE_CAPABILITY (compatibility only, not a hardware capability)")]),
    (_rx(r"^仅支持name、total_memory、L2_cache_size、cube_core_num和vector_core_num属性"),
     lambda m: [("frag", "only name, total_memory, L2_cache_size, cube_core_num and vector_core_num are filled")]),
    (_rx(r"六维以上时可能会出现性能下降"), lambda m: [("frag", "may be slow for inputs above 6 dims")]),
    (_rx(r"fill_uninitialized_memory"),
     lambda m: [("frag", "with deterministic algorithms on, TorchNPU does not fill uninitialised memory by default")]),
    (_rx(r"HCCL_DETERMINISTIC"), lambda m: [("frag", "HCCL_DETERMINISTIC takes precedence for HCCL collectives")]),
    (_rx(r"不支持多进程加载NPU数据"), lambda m: [("frag", "num_workers=0 only (no multi-process loading of NPU data)")]),
    (_rx(r"^不支持NPU融合优化器对象$"), lambda m: [("frag", "NPU fused optimizers not supported")]),
    (_rx(r"该接口涉及高危操作"), lambda m: [("frag", "high-risk API, see the Ascend custom-API documentation")]),
    (_rx(r"^`return_indices`为True时，返回的`argmax`的数据类型为int32$"),
     lambda m: [("frag", "indices are int32 when return_indices=True")]),
    (_rx(r"`topk`索引结果与GPU/CPU不一致"), lambda m: [("frag", "index order may differ from GPU/CPU; sorted=True only")]),
    (_rx(r"^不支持传入`torch.npu.DtypeTensor`类型$"), lambda m: [("frag", "torch.npu.<Dtype>Tensor types not accepted")]),
    (_rx(r"^(?:NPU设备)?启用rpc时"), lambda m: [("frag", "RPC on NPU needs backend=BackendType.NPU_TENSORPIPE")]),
    (_rx(r"^options绑定`NPUTensorPipeRpcBackendOptions`"),
     lambda m: [("frag", "use torch_npu.distributed.rpc.options.NPUTensorPipeRpcBackendOptions")]),
    (_rx(r"FSDP，推荐传入`device_id"), lambda m: [("frag", "pass device_id=torch.device('npu:0')")]),
    (_rx(r"在输入包含0的情况下，输出中可能会包含正0和负0"), lambda m: [("frag", "zeros may come out as +0 and -0")]),
    (_rx(r"^导出文件内容为json格式$"), lambda m: [("frag", "exports JSON")]),
    (_rx(r"jit_compile=False"), lambda m: [("frag", "jit_compile mode restrictions apply")]),
]


def _soc_scope(line: str) -> tuple[tuple[str, ...] | None, str]:
    """(SoCs the line is restricted to, rest of the line); None = all SoCs; () = none of ours."""
    match = _SOC_TARGET.match(line)
    if match:
        soc = _SOC_TERMS.get(match.group(1).strip())
        return ((soc,) if soc else ()), match.group(2)
    match = _SOC_PREFIX.match(line)
    if match:
        terms = re.findall(r"<term>([^<]+)</term>", match.group(1))
        socs = tuple(s for s in (_SOC_TERMS.get(t.strip()) for t in terms) if s)
        return socs, match.group(2)
    return None, line


def translate_limit_line(line: str) -> list[tuple]:
    """English actions for one limit line; [] when no rule understands it."""
    text = line.strip().rstrip("；;。")
    for pattern, handler in _RULES:
        match = pattern.search(text)
        if match:
            actions = handler(match)
            return [a for a in actions if a[0] != "frag" or not _has_cjk(a[1])]
    return []


def analyse_limits(lines: list[str]) -> LimitInfo:
    info = LimitInfo()
    for soc in SOCS:
        info.fragments[soc] = []
        info.flags[soc] = set()
        info.excluded[soc] = set()
        info.added[soc] = set()
        info.untranslated[soc] = 0
        info.applies[soc] = False
        info.dtype_only[soc] = True
    for line in lines:
        scope, rest = _soc_scope(line)
        if scope == ():
            continue  # applies only to products we do not model (e.g. Atlas training series)
        socs = SOCS if scope is None else scope
        actions = translate_limit_line(rest)
        for soc in socs:
            info.applies[soc] = True
        if not actions:
            for soc in socs:
                info.untranslated[soc] += 1
                info.dtype_only[soc] = False
            continue
        for action in actions:
            kind = action[0]
            for soc in socs:
                if kind != "dtypes":
                    if kind != "ignore":
                        info.dtype_only[soc] = False
                if kind == "dtypes":
                    param, dts = action[1], action[2]
                    if soc not in info.dtypes:
                        info.dtypes[soc] = list(dts)
                        info.param[soc] = param
                    elif info.param.get(soc) == param and scope is not None:
                        info.dtypes[soc] = list(dts)  # SoC-specific list overrides the general one
                    elif info.param.get(soc) == param and info.dtypes[soc] == list(dts):
                        pass  # the same list stated twice
                    else:
                        frag = f"{param}: {', '.join(dts)} only"
                        if frag not in info.fragments[soc]:
                            info.fragments[soc].append(frag)
                elif kind == "exclude":
                    info.excluded[soc].update(action[1])
                elif kind == "add":
                    info.added[soc].update(action[1])
                elif kind == "flag":
                    info.flags[soc].add(action[1])
                elif kind == "frag":
                    if action[1] not in info.fragments[soc]:
                        info.fragments[soc].append(action[1])
                elif kind == "npu":
                    info.npu_name = action[1]
    for soc in SOCS:
        if not info.applies[soc]:
            info.dtype_only[soc] = False
    return info


# --------------------------------------------------------------------------------------------
# 4. python sources read with ast (never imported)


def parse_all_list(text: str) -> list[str]:
    """The literal ``__all__`` of a module (``__all__ = [...]`` plus ``+=`` / ``.extend``)."""
    tree = ast.parse(text)
    names: list[str] = []
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets):
            names = list(ast.literal_eval(node.value))
        elif isinstance(node, ast.AugAssign) and isinstance(node.target, ast.Name) and node.target.id == "__all__":
            try:
                names.extend(ast.literal_eval(node.value))
            except ValueError:
                pass
    return names


def parse_exposed_api(text: str) -> list[str]:
    tree = ast.parse(text)
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "public_npu_functions" for t in node.targets
        ):
            return sorted(set(ast.literal_eval(node.value)))
    raise GenerationError("exposed_api.py: no public_npu_functions list")


def _dotted(node: ast.AST) -> str | None:
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return ".".join(reversed(parts))
    return None


def parse_transfer_to_npu(text: str) -> dict:
    """The CUDA -> NPU name map implemented by ``torch_npu/contrib/transfer_to_npu.py``."""
    tree = ast.parse(text)
    lists: dict[str, list[str]] = {}
    functions: dict[str, ast.FunctionDef] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            try:
                value = ast.literal_eval(node.value)
            except ValueError:
                continue
            if isinstance(value, list) and all(isinstance(v, str) for v in value):
                lists[node.targets[0].id] = value
        elif isinstance(node, ast.FunctionDef):
            functions[node.name] = node

    module_patches: dict[str, str] = {}
    for func in functions.values():
        for node in ast.walk(func):
            if (
                isinstance(node, ast.Assign)
                and len(node.targets) == 1
                and isinstance(node.targets[0], ast.Name)
                and node.targets[0].id == "patches"
                and isinstance(node.value, ast.List)
            ):
                for item in node.value.elts:
                    if isinstance(item, ast.List) and len(item.elts) == 2 and isinstance(item.elts[0], ast.Constant):
                        target = _dotted(item.elts[1])
                        if target:
                            module_patches["torch." + item.elts[0].value] = target

    init = functions.get("_init")
    if init is None:
        raise GenerationError("transfer_to_npu.py: no _init() function")
    aliases: dict[str, str] = {}
    device_rule: set[str] = set()
    hccl_rule: set[str] = set()
    other_patches: dict[str, str] = {}

    def wrapped_names(call: ast.AST) -> tuple[set[str], ast.AST | None]:
        """Wrapper function names applied by ``w(x)`` / ``_compose_wrappers(a, b)(x)``."""
        if not isinstance(call, ast.Call):
            return set(), None
        func = call.func
        if isinstance(func, ast.Name):
            return {func.id}, call.args[0] if call.args else None
        if isinstance(func, ast.Call) and isinstance(func.func, ast.Name) and func.func.id == "_compose_wrappers":
            return {a.id for a in func.args if isinstance(a, ast.Name)}, call.args[0] if call.args else None
        return set(), None

    for node in ast.walk(init):
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target = _dotted(node.targets[0])
            if not target or not target.startswith("torch."):
                continue
            source = _dotted(node.value)
            if source and (source.startswith("torch.") or source.startswith("torch_npu.")):
                aliases[target] = source
                continue
            if isinstance(node.value, ast.Name):
                other_patches[target] = node.value.id
                continue
            wrappers, _ = wrapped_names(node.value)
            if "_wrapper_cuda" in wrappers:
                device_rule.add(target)
            if "_wrapper_hccl" in wrappers:
                hccl_rule.add(target)
            for name in sorted(wrappers - {"_wrapper_cuda", "_wrapper_hccl"}):
                other_patches[target] = name
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "_device_wrapper":
            if len(node.args) != 2:
                continue
            owner = _dotted(node.args[0])
            names_node = node.args[1]
            if isinstance(names_node, ast.Name):
                names = lists.get(names_node.id, [])
            else:
                try:
                    names = list(ast.literal_eval(names_node))
                except ValueError:
                    names = []
            if owner:
                device_rule.update(f"{owner}.{n}" for n in names)
    return {
        "aliases": dict(sorted(aliases.items())),
        "device_kwargs": sorted(lists.get("device_kwargs_list", [])),
        "device_rule": sorted(device_rule),
        "hccl_rule": sorted(hccl_rule),
        "module_patches": dict(sorted(module_patches.items())),
        "other_patches": dict(sorted(other_patches.items())),
    }


def parse_op_plugin_docs(text: str) -> dict[str, list[str]]:
    """Custom op -> SoCs named in the "支持的型号" section of its wheel docstring."""
    tree = ast.parse(text)
    products: dict[str, list[str]] = {}
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "_add_torch_npu_docstr"):
            continue
        if len(node.args) < 2 or not all(isinstance(a, ast.Constant) and isinstance(a.value, str) for a in node.args[:2]):
            continue
        name, doc = node.args[0].value, node.args[1].value
        match = re.search(r"支持的型号[:：]?[ \t]*\n(.*?)(?:\n[ \t]*\n|\Z)", doc, re.S)
        if not match:
            continue
        socs: set[str] = set()
        for line in match.group(1).splitlines():
            line = line.strip().lstrip("-").strip()
            if not re.search(r"Atlas|Ascend|昇腾|A2|A3", line):
                break
            if "A2" in line:
                socs.add("A2")
            if "A3" in line:
                socs.add("A3")
            if "950" in line:
                socs.add("950DT")
        products[name] = [s for s in SOCS if s in socs]
    return products


def _format_args(args: ast.arguments, source: str, constants: Mapping[str, str] | None = None) -> str:
    """Constructor arguments without ``self``, defaults spelled as in the source (``1e-3``);
    module-level literal constants used as defaults are replaced by their value."""
    constants = constants or {}

    def default_text(node: ast.AST) -> str:
        if isinstance(node, ast.Name) and node.id in constants:
            return constants[node.id]
        text = ast.get_source_segment(source, node) or ast.unparse(node)
        return re.sub(r"\s+", " ", text)

    positional = list(args.posonlyargs) + list(args.args)
    defaults = [None] * (len(positional) - len(args.defaults)) + list(args.defaults)
    parts = []
    for arg, default in zip(positional, defaults):
        parts.append(arg.arg if default is None else f"{arg.arg}={default_text(default)}")
    if args.vararg:
        parts.append("*" + args.vararg.arg)
    elif args.kwonlyargs:
        parts.append("*")
    for arg, default in zip(args.kwonlyargs, args.kw_defaults):
        parts.append(arg.arg if default is None else f"{arg.arg}={default_text(default)}")
    if args.kwarg:
        parts.append("**" + args.kwarg.arg)
    if parts and parts[0] == "self":
        parts = parts[1:]
    return ", ".join(parts)


def parse_optimizers(init_text: str, module_texts: Mapping[str, str]) -> dict[str, str]:
    """Public ``torch_npu.optim`` classes -> constructor signature (defaults as written)."""
    tree = ast.parse(init_text)
    public = parse_all_list(init_text)
    where: dict[str, str] = {}
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and node.level == 1 and node.module:
            for alias in node.names:
                where[alias.asname or alias.name] = node.module
    out: dict[str, str] = {}
    for cls in public:
        module = where.get(cls)
        source = module_texts.get(module or "")
        if source is None:
            continue
        mod = ast.parse(source)
        constants: dict[str, str] = {}
        for node in mod.body:
            if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
                try:
                    ast.literal_eval(node.value)
                except ValueError:
                    continue
                constants[node.targets[0].id] = ast.get_source_segment(source, node.value) or ast.unparse(node.value)
        for node in mod.body:
            if isinstance(node, ast.ClassDef) and node.name == cls:
                for item in node.body:
                    if isinstance(item, ast.FunctionDef) and item.name == "__init__":
                        out[cls] = f"{cls}({_format_args(item.args, source, constants)})"
    return dict(sorted(out.items()))


# --------------------------------------------------------------------------------------------
# 5. op-plugin derivatives.yaml


def parse_derivatives(text: str, version_key: str) -> dict[str, list[str]]:
    """Ops with a backward formula valid for ``version_key`` (e.g. ``v2.14``) -> grad inputs."""
    data = _yaml_load(text) or {}
    all_versions = [str(v) for v in data.get("all_version") or []]
    def applies(spec) -> bool:
        if spec is None or spec == "all_version":
            return True
        if isinstance(spec, str):
            return spec == version_key
        spec = [str(s) for s in spec]
        if len(spec) == 2 and (spec[1] == "newest" or spec[1] in all_versions) and spec[0] in all_versions:
            lo = all_versions.index(spec[0])
            hi = len(all_versions) - 1 if spec[1] == "newest" else all_versions.index(spec[1])
            return version_key in all_versions[lo : hi + 1]
        return version_key in spec

    skip = {"name", "version", "output_differentiability", "dispatch", "result"}
    out_lists: dict[str, list] = {}
    for entry in data.get("backward") or []:
        if not isinstance(entry, dict) or "name" not in entry or not applies(entry.get("version")):
            continue
        base = op_name_of(entry["name"]).split(".", 1)[0]
        inputs = out_lists.setdefault(base, [])
        for key in entry:
            if key in skip or str(key).startswith("result"):
                continue
            for k in str(key).split(","):
                k = k.strip()
                if k and k not in inputs:
                    inputs.append(k)
    return dict(sorted(out_lists.items()))


# --------------------------------------------------------------------------------------------
# 6. SOURCES.md of the shared data snapshot


def parse_sources_md(text: str) -> dict[str, dict]:
    """``data/`` path -> {commit, path, licence, sha256} from the snapshot's SOURCES.md."""
    rows: dict[str, dict] = {}
    for line in text.splitlines():
        if not line.startswith("| `"):
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) < 7:
            continue
        path = cells[0].strip("`")
        sha = cells[-1].strip("`")
        if not re.fullmatch(r"[0-9a-f]{64}", sha):
            continue
        rows[path] = {
            "upstream": cells[1],
            "commit": cells[2].strip("`"),
            "path": cells[3].strip("`"),
            "licence": cells[4],
            "sha256": sha,
        }
    return rows


# --------------------------------------------------------------------------------------------
# 7. building the table


@dataclass
class Inputs:
    """Everything the builder reads, already as text (tests pass small excerpts)."""

    wheel: Mapping[str, str]  # wheel member path -> text
    native_functions: str
    torch_cuda_init: str
    docs: Mapping[str, str]  # docs file name -> markdown
    derivatives: str
    meta: dict = field(default_factory=dict)  # header "inputs" section (versions, sha256s)
    docs_commit: str = "unknown"
    op_plugin_commit: str = "unknown"
    torch_npu_version: str = TORCH_NPU_VERSION
    torch_version: str = TORCH_VERSION


def _short(commit: str) -> str:
    return commit[:7] if re.fullmatch(r"[0-9a-f]{40}", commit or "") else (commit or "unknown")


def _npu_form(name: str | None) -> str | None:
    if not name:
        return None
    name = normalize_name(name)
    if name.startswith("torch_npu.npu."):
        name = "torch.npu." + name[len("torch_npu.npu."):]
    elif name == "torch_npu.npu":
        name = "torch.npu"
    return name


def _wheel_module_file(module: str, wheel: Mapping[str, str]) -> str | None:
    base = module.replace(".", "/")
    for candidate in (base + ".py", base + "/__init__.py"):
        if candidate in wheel:
            return candidate
    return None


class _Entry(dict):
    """Mutable entry during generation (plain dict once written)."""


def build_table(inp: Inputs) -> dict:
    wheel = inp.wheel
    codegen = parse_codegen_yaml(wheel[WHEEL_CODEGEN])
    aten = parse_native_functions(inp.native_functions, codegen.npu_ops)
    exposed = set(parse_exposed_api(wheel[WHEEL_EXPOSED]))
    npu_all = parse_all_list(wheel[WHEEL_NPU_INIT])
    cuda_all = parse_all_list(inp.torch_cuda_init)
    transfer = parse_transfer_to_npu(wheel[WHEEL_TRANSFER])
    products = parse_op_plugin_docs(wheel[WHEEL_OP_DOCS]) if WHEEL_OP_DOCS in wheel else {}
    optim_texts = {
        path[len("torch_npu/optim/"):-3]: text
        for path, text in wheel.items()
        if path.startswith("torch_npu/optim/") and path.endswith(".py") and path.count("/") == 2
    }
    optimizers = parse_optimizers(wheel[WHEEL_OPTIM_INIT], optim_texts) if WHEEL_OPTIM_INIT in wheel else {}
    major_minor = ".".join(inp.torch_npu_version.split(".")[:2])
    derivatives = parse_derivatives(inp.derivatives, "v" + major_minor)

    sources = {
        "aten": f"torch {inp.torch_version} native_functions.yaml",
        "derivatives": f"Ascend/op-plugin derivatives.yaml @{_short(inp.op_plugin_commit)}",
        "wheel": f"torch-npu {inp.torch_npu_version} wheel",
        "wheel:exposed_api": f"torch-npu {inp.torch_npu_version} wheel utils/exposed_api.py",
        "wheel:npu_all": f"torch-npu {inp.torch_npu_version} wheel npu/__init__.py",
        "wheel:op_docs": f"torch-npu {inp.torch_npu_version} wheel _op_plugin_docs.py",
        "wheel:optim": f"torch-npu {inp.torch_npu_version} wheel optim/",
        "wheel:transfer_to_npu": f"torch-npu {inp.torch_npu_version} wheel contrib/transfer_to_npu.py",
        "torch:cuda": f"torch {inp.torch_version} torch/cuda/__init__.py",
    }
    entries: dict[str, _Entry] = {}

    def entry(name: str) -> _Entry:
        if name not in entries:
            entries[name] = _Entry(sources=set(), flags={s: set() for s in SOCS})
        return entries[name]

    # -- docs rows -------------------------------------------------------------------------
    doc_rows: dict[str, DocRow] = {}
    for filename in sorted(inp.docs):
        for row in parse_docs_md(inp.docs[filename], filename):
            doc_rows.setdefault(row.name, row)
            sources[f"docs:{filename}"] = (
                f"Ascend/pytorch docs pytorch_2-13-0/{filename} @{_short(inp.docs_commit)} (CC BY 4.0)"
            )

    for name, row in sorted(doc_rows.items()):
        e = entry(name)
        e["origin"] = "docs"
        e["sources"].add(f"docs:{row.file}")
        kernel, op = kernel_for(name, aten)
        e["kernel"], e["aten"] = kernel, op
        if op:
            e["sources"].add("aten")
        lim = analyse_limits(row.limit_lines)
        status: dict[str, str] = {}
        dtypes: dict[str, list] = {}
        excluded: dict[str, list] = {}
        fragments: dict[str, list] = {}
        more: dict[str, int] = {}
        ignored_dtypes: list[str] = []
        non_tensor = name.startswith(DTYPE_COPY_PASTE_PREFIXES)
        for soc in SOCS:
            flags = e["flags"][soc]
            if soc not in row.support:
                status[soc] = "unverified"
                continue
            if not row.support[soc]:
                status[soc] = "unsupported"
                if kernel in ("npu_kernel", "npu_kernel_via_delegate"):
                    flags.add("doc_kernel_conflict")
                continue
            soc_dtypes = list(lim.dtypes.get(soc, []))
            if non_tensor and lim.dtype_only[soc] and soc_dtypes:
                ignored_dtypes = soc_dtypes
                flags.add("doc_dtype_ignored")
                status[soc] = "supported"
                continue
            status[soc] = "partial" if lim.applies[soc] else "supported"
            if soc_dtypes:
                dtypes[soc] = _sorted_dtypes((set(soc_dtypes) | lim.added[soc]) - lim.excluded[soc])
            if lim.excluded[soc]:
                excluded[soc] = _sorted_dtypes(lim.excluded[soc])
            flags.update(lim.flags[soc])
            fragments[soc] = list(lim.fragments[soc])
            more[soc] = lim.untranslated[soc]
            if kernel == "cpu_fallback":
                flags.add("cpu_fallback")
        e["status"] = status
        e["dtypes"] = dtypes
        e["dtypes_excluded"] = excluded
        e["limits"] = fragments
        e["more_limits"] = more
        if ignored_dtypes:
            e["ignored_dtypes"] = _sorted_dtypes(ignored_dtypes)
        npu = _npu_form(row.npu_name) or _npu_form(lim.npu_name)
        if npu:
            e["npu_name"] = npu

    # -- public torch names from native_functions.yaml that the docs do not list ----------
    for name, base in sorted(aten.bindings.items()):
        if name in entries:
            continue
        kernel, op = aten.base_kernel[base]
        e = entry(name)
        e["origin"] = "aten"
        e["kernel"], e["aten"] = kernel, op
        e["sources"].add("aten")
        e["sources"].add("wheel")
        e["status"] = {s: ("cpu_fallback" if kernel == "cpu_fallback" else "unverified") for s in SOCS}
        if kernel == "cpu_fallback":
            for s in SOCS:
                e["flags"][s].add("cpu_fallback")

    # -- torch.cuda.* and transfer_to_npu ---------------------------------------------------
    npu_all_set = set(npu_all)
    aliases = dict(transfer["aliases"])
    handled = set(aliases) | set(transfer["module_patches"])

    def ensure(name: str, origin: str) -> _Entry:
        e = entry(name)
        if "origin" not in e:
            e["origin"] = origin
            e["kernel"], e["aten"] = ("none", None)
            e["status"] = {s: "unverified" for s in SOCS}
        return e

    for x in sorted(set(cuda_all) | npu_all_set):
        name = f"torch.cuda.{x}"
        if x not in cuda_all and name not in entries:
            continue  # NPU-only name: no CUDA spelling to migrate from
        e = ensure(name, "cuda")
        e["sources"].add("torch:cuda")
        if x in npu_all_set:
            e["npu_name"] = f"torch.npu.{x}"
            e["sources"].add("wheel:npu_all")
            for s in SOCS:
                e["flags"][s].add("transfer_to_npu")
        elif name not in handled and e["origin"] == "cuda":
            e["status"] = {s: "unsupported" for s in SOCS}
            e["limits"] = {s: ["no NPU counterpart: not in torch_npu.npu.__all__ and not patched by transfer_to_npu"] for s in SOCS}
    for x in sorted(npu_all_set):
        name = f"torch.npu.{x}"
        e = ensure(name, "npu")
        e["sources"].add("wheel:npu_all")
        cuda_row = entries.get(f"torch.cuda.{x}")
        if cuda_row is not None and cuda_row.get("origin") == "docs":
            e["status"] = dict(cuda_row["status"])
            e["sources"].update(s for s in cuda_row["sources"] if s.startswith("docs:"))
        for s in SOCS:
            e["flags"][s].add("npu_native")

    # modules replaced by transfer_to_npu: names of their __all__ become torch.npu.* names
    for dest, src in transfer["module_patches"].items():
        if dest == "torch.cuda":
            continue
        path = _wheel_module_file(src, wheel)
        names = parse_all_list(wheel[path]) if path else []
        if names and dest.startswith("torch.cuda."):
            for x in names:
                e = ensure(f"{dest}.{x}", "transfer")
                e["npu_name"] = _npu_form(f"{src}.{x}")
                e["sources"].add("wheel:transfer_to_npu")
                for s in SOCS:
                    e["flags"][s].add("transfer_to_npu")
        e = ensure(dest, "transfer")
        e["npu_name"] = _npu_form(src)
        e["sources"].add("wheel:transfer_to_npu")
        for s in SOCS:
            e["flags"][s].add("transfer_to_npu")
    for dest, src in aliases.items():
        e = ensure(dest, "transfer")
        e["npu_name"] = _npu_form(src)
        e["sources"].add("wheel:transfer_to_npu")
        if dest.rsplit(".", 1)[-1] != src.rsplit(".", 1)[-1] and "Double" in dest and "Float" in src:
            for s in SOCS:
                e["flags"][s].add("precision_change")
            e.setdefault("limits", {})
            for s in SOCS:
                frags = e["limits"].setdefault(s, [])
                if "transfer_to_npu rebinds it to a float32 type (double not supported)" not in frags:
                    frags.append("transfer_to_npu rebinds it to a float32 type (double not supported)")
        for s in SOCS:
            e["flags"][s].add("transfer_to_npu")
        if e["origin"] == "transfer" and dest.startswith("torch.cuda."):
            e["status"] = {s: "unverified" for s in SOCS}
    for rule, flag in (("device_rule", "device_rule"), ("hccl_rule", "hccl_rule")):
        for name in transfer[rule]:
            if name in entries:
                for s in SOCS:
                    entries[name]["flags"][s].add(flag)
                entries[name]["sources"].add("wheel:transfer_to_npu")

    # -- custom ops (torch_npu.X) ------------------------------------------------------------
    for base, rec in sorted(codegen.custom.items()):
        name = f"torch_npu.{base}"
        e = entry(name)
        e["origin"] = "custom"
        e["kernel"], e["aten"] = "npu_kernel", None
        e["sources"].update({"wheel"})
        schemas = rec["schemas"]
        e["signature"] = schemas.get(base) or schemas[sorted(schemas)[0]]
        documented = products.get(base)
        if documented is not None:
            e["sources"].add("wheel:op_docs")
        e["status"] = {s: ("supported" if documented and s in documented else "unverified") for s in SOCS}
        public = rec["exposed"] or base in exposed
        if base in exposed:
            e["sources"].add("wheel:exposed_api")
        grads = derivatives.get(base)
        limits: list[str] = []
        for s in SOCS:
            if public:
                e["flags"][s].add("public")
            if grads is not None:
                e["flags"][s].add("autograd")
            if "nondeterministic_seeded" in rec["tags"]:
                e["flags"][s].add("nondeterministic_seeded")
            e["flags"][s].add("npu_native")
        if grads is not None:
            e["sources"].add("derivatives")
            if grads:
                limits.append("autograd: gradients for " + ", ".join(grads))
        if documented is not None:
            limits.append("documented products: " + (", ".join(documented) if documented else "none of A2/A3/950DT"))
        if limits:
            e["limits"] = {s: list(limits) for s in SOCS}
    for cls, signature in optimizers.items():
        if cls == "NpuFusedOptimizerBase":
            continue
        name = f"torch_npu.optim.{cls}"
        e = entry(name)
        e["origin"] = "optim"
        e["kernel"], e["aten"] = "none", None
        e["status"] = {s: "unverified" for s in SOCS}
        e["signature"] = signature
        e["sources"].add("wheel:optim")
        for s in SOCS:
            e["flags"][s].add("npu_native")

    # -- bf16 undocumented ------------------------------------------------------------------
    for e in entries.values():
        bf16u = []
        for soc in SOCS:
            dts = e.get("dtypes", {}).get(soc)
            if (
                dts
                and e["status"].get(soc) in ("supported", "partial")
                and "bf16" not in dts
                and ("fp16" in dts or "fp32" in dts)
                and e.get("kernel") in KERNEL_RUNS_ON_NPU
            ):
                bf16u.append(soc)
        e["bf16_undocumented"] = bf16u

    table_entries = {name: _compact_entry(e) for name, e in sorted(entries.items())}
    counts = _counts(table_entries, aten)
    aten_by_class: dict[str, list[str]] = {k: [] for k in KERNELS if k not in ("none", "unknown")}
    for op, cls in sorted(aten.overloads.items()):
        aten_by_class[cls].append(op)

    return {
        "format": FORMAT_VERSION,
        "generator": {"script": "op_coverage/generate.py", "version": GENERATOR_VERSION},
        "torch_npu_version": inp.torch_npu_version,
        "combined": (
            f"torch-npu {inp.torch_npu_version} wheel (NPU kernels, custom ops, transfer_to_npu, optimizers) x "
            f"torch {inp.torch_version} native_functions.yaml (ATen classification; torch-npu 2.14.0's op list "
            f"is byte-identical to 2.13.0's) x Ascend/pytorch native-API docs pytorch_2-13-0 @{_short(inp.docs_commit)} "
            f"(per-SoC status, dtypes) x Ascend/op-plugin derivatives.yaml @{_short(inp.op_plugin_commit)} (autograd)"
        ),
        "inputs": inp.meta,
        "attribution": (
            "Per-SoC support status, dtype lists, flags and NPU names are derived from the Ascend/pytorch "
            "documentation (docs/zh/api/native_api/pytorch_2-13-0, CC BY 4.0, "
            "https://creativecommons.org/licenses/by/4.0/). Changes: reduced to facts; the Chinese prose is not "
            "reproduced, limits are summarised in short English phrases generated by op_coverage/generate.py. "
            "Kernel, custom-op, transfer_to_npu and optimizer data come from torch-npu and PyTorch (BSD-3-Clause); "
            "autograd data from Ascend/op-plugin (BSD-3-Clause)."
        ),
        "rules": RULES_TEXT,
        "socs": {s: SOC_TITLES[s] for s in SOCS},
        "soc_order": list(SOCS),
        "statuses": list(STATUSES),
        "kernels": list(KERNELS),
        "flags": dict(sorted(FLAGS.items())),
        "sources": dict(sorted(sources.items())),
        "torch_pairings": {
            "source": TORCH_PAIRINGS_SOURCE,
            "pairs": [{"torch": t, "torch_npu": n, "requires": r} for t, n, r in TORCH_PAIRINGS],
        },
        "counts": counts,
        "transfer_to_npu": transfer,
        "aten": aten_by_class,
        "entries": table_entries,
    }


RULES_TEXT = {
    "status": (
        "Docs win for status: a row in the Ascend native-API list decides per SoC (cross = unsupported, "
        "tick without limits = supported, tick with limits = partial). The ATen kernel signal never overrides "
        "a documented status; disagreements are kept as flags: doc_kernel_conflict (cross although the ATen op "
        "has an NPU kernel) and cpu_fallback (tick although the ATen op has no NPU kernel and would run on the "
        "CPU fallback)."
    ),
    "unlisted": (
        "APIs the docs do not list are 'unverified', except when their ATen op has neither an NPU kernel nor a "
        "decomposition (kernel cpu_fallback): then 'cpu_fallback'. torch.cuda.X not in torch_npu.npu.__all__ "
        "and not patched by transfer_to_npu is 'unsupported'. Custom ops are 'supported' on the products named "
        "in their wheel docstring and 'unverified' elsewhere; torch_npu optimizers are 'unverified'."
    ),
    "dtypes": (
        "dtypes is the documented list for the first tensor argument (empty = not documented). "
        "bf16_undocumented lists SoCs where that list has fp16/fp32 but not bf16 while the ATen layer runs the "
        "op on the NPU (npu_kernel, via delegate, decomposes, composite_explicit): a documentation gap, "
        "info only, never a warning by itself. Dtype-only limits on non-tensor APIs (torch.backends.*, "
        "torch.nn.Module containers and methods) are copy-paste in the docs and ignored (doc_dtype_ignored)."
    ),
    "npu_name": (
        "torch.cuda.X -> torch.npu.X iff X is in torch_npu.npu.__all__; otherwise an explicit transfer_to_npu "
        "rebinding, otherwise the docs' NPU form (torch_npu.npu.* written as torch.npu.*)."
    ),
}


def _compact_entry(e: _Entry) -> dict:
    """Per-SoC values folded into a default plus ``soc_*`` overrides.

    * ``flags`` are additive: ``flags`` holds the flags of every SoC, ``soc_flags[soc]`` extras.
    * ``dtypes``, ``dtypes_excluded``, ``limits``, ``more_limits`` describe the SoCs where the
      API is not unsupported (all SoCs when it is unsupported everywhere); ``soc_<key>[soc]``
      replaces the default for one SoC. Readers ignore them for an unsupported SoC otherwise.
    """
    out: dict = {}
    status = e["status"]
    values = {status[s] for s in SOCS}
    out["status"] = status[SOCS[0]] if len(values) == 1 else {s: status[s] for s in SOCS}
    out["kernel"] = e.get("kernel", "unknown")
    if e.get("aten"):
        out["aten"] = e["aten"]
    out["origin"] = e["origin"]
    out["sources"] = sorted(e["sources"])
    applicable = [s for s in SOCS if status[s] != "unsupported"] or list(SOCS)

    def per_soc(key: str, value_of: Callable[[str], object], empty) -> None:
        vals = {s: value_of(s) for s in applicable}
        freq: dict[str, int] = {}
        for s in applicable:
            k = json.dumps(vals[s], sort_keys=True)
            freq[k] = freq.get(k, 0) + 1
        common = json.loads(sorted(freq.items(), key=lambda kv: (-kv[1], kv[0]))[0][0])
        if common != empty:
            out[key] = common
        overrides = {s: vals[s] for s in applicable if vals[s] != common}
        if overrides:
            out["soc_" + key] = overrides

    flags = e["flags"]
    common_flags = set.intersection(*(flags[s] for s in SOCS))
    if common_flags:
        out["flags"] = sorted(common_flags)
    extra = {s: sorted(flags[s] - common_flags) for s in SOCS if flags[s] - common_flags}
    if extra:
        out["soc_flags"] = extra
    per_soc("dtypes", lambda s: list(e.get("dtypes", {}).get(s, [])), [])
    per_soc("dtypes_excluded", lambda s: list(e.get("dtypes_excluded", {}).get(s, [])), [])
    per_soc("limits", lambda s: list(e.get("limits", {}).get(s, [])), [])
    per_soc("more_limits", lambda s: int(e.get("more_limits", {}).get(s, 0)), 0)
    if e.get("bf16_undocumented"):
        out["bf16_undocumented"] = list(e["bf16_undocumented"])
    if e.get("ignored_dtypes"):
        out["ignored_dtypes"] = list(e["ignored_dtypes"])
    if e.get("npu_name"):
        out["npu_name"] = e["npu_name"]
    if e.get("signature"):
        out["signature"] = e["signature"]
    return out


def _status_of(entry: dict, soc: str) -> str:
    status = entry["status"]
    return status if isinstance(status, str) else status[soc]


def _counts(entries: dict, aten: AtenInfo) -> dict:
    by_soc = {}
    for soc in SOCS:
        c = {s: 0 for s in STATUSES}
        for e in entries.values():
            c[_status_of(e, soc)] += 1
        by_soc[soc] = c
    aten_counts = {k: 0 for k in KERNELS if k not in ("none", "unknown")}
    for cls in aten.overloads.values():
        aten_counts[cls] += 1
    origins: dict[str, int] = {}
    for e in entries.values():
        origins[e["origin"]] = origins.get(e["origin"], 0) + 1
    return {
        "entries": len(entries),
        "by_origin": dict(sorted(origins.items())),
        "status_by_soc": by_soc,
        "aten_overloads": len(aten.overloads),
        "aten_by_kernel": aten_counts,
    }


# --------------------------------------------------------------------------------------------
# 8. serialisation (byte-deterministic)


def dump_table(table: dict) -> bytes:
    """Sorted keys, ASCII only, one entry per line for the big maps, trailing newline."""
    lines = ["{"]
    keys = sorted(table)
    for i, key in enumerate(keys):
        comma = "," if i < len(keys) - 1 else ""
        value = table[key]
        if key in ("entries", "aten") and isinstance(value, dict):
            lines.append(f"{json.dumps(key)}: {{")
            inner = sorted(value)
            for j, name in enumerate(inner):
                c = "," if j < len(inner) - 1 else ""
                lines.append(
                    f"{json.dumps(name)}: "
                    f"{json.dumps(value[name], sort_keys=True, ensure_ascii=True, separators=(',', ':'))}{c}"
                )
            lines.append("}" + comma)
        else:
            text = json.dumps(value, sort_keys=True, ensure_ascii=True, indent=1)
            lines.append(f"{json.dumps(key)}: {text}{comma}")
    lines.append("}")
    return ("\n".join(lines) + "\n").encode("ascii")


# --------------------------------------------------------------------------------------------
# 9. gathering the real inputs


def ensure_wheel(wheel: Path | None, cache_dir: Path, offline: bool) -> Path:
    """The pinned wheel, downloaded with pip into ``cache_dir`` if needed; sha256 verified."""
    path = wheel or cache_dir / WHEEL_FILE
    if not path.is_file():
        if wheel is not None or offline:
            raise GenerationError(
                f"torch-npu wheel not found at {path}; run without --offline to download it, or "
                f"`pip download --no-deps torch-npu=={TORCH_NPU_VERSION} -d {cache_dir}`"
            )
        cache_dir.mkdir(parents=True, exist_ok=True)
        cmd = [sys.executable, "-m", "pip", "download", "--disable-pip-version-check", "-q", "-d", str(cache_dir), *WHEEL_PIP_ARGS]
        print("downloading:", " ".join(cmd), file=sys.stderr)
        result = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        if result.returncode != 0 or not path.is_file():
            raise GenerationError(f"pip download of torch-npu=={TORCH_NPU_VERSION} failed:\n{result.stdout[-2000:]}")
    digest = sha256_file(path)
    if digest != WHEEL_SHA256:
        raise GenerationError(
            f"{path}: sha256 {digest} does not match the pinned {WHEEL_SHA256} "
            f"({WHEEL_FILE}); refusing to use it. Delete the file and download it again."
        )
    return path


def read_wheel(path: Path) -> tuple[dict[str, str], dict[str, str]]:
    """(member -> text, member -> sha256) for the members the generator needs. Zip read only."""
    wanted_prefixes = ("torch_npu/optim/", "torch_npu/npu/")
    wanted = {WHEEL_CODEGEN, WHEEL_EXPOSED, WHEEL_NPU_INIT, WHEEL_TRANSFER, WHEEL_OP_DOCS, WHEEL_OPTIM_INIT}
    texts: dict[str, str] = {}
    shas: dict[str, str] = {}
    with zipfile.ZipFile(path) as zf:
        names = set(zf.namelist())
        missing = sorted(wanted - names)
        if missing:
            raise GenerationError(f"{path.name} lacks {', '.join(missing)}")
        for name in sorted(names):
            if name in wanted or (name.startswith(wanted_prefixes) and name.endswith(".py")):
                data = zf.read(name)
                texts[name] = data.decode("utf-8")
                if name in wanted:
                    shas[name] = sha256_bytes(data)
    return texts, shas


def find_torch_file(rel: str) -> Path:
    """A file of the installed torch distribution, located without importing torch."""
    import importlib.util

    top = rel.split("/", 1)[0]
    spec = importlib.util.find_spec(top)
    if spec is None or not spec.submodule_search_locations:
        raise GenerationError(f"cannot locate the installed '{top}' package (pip install torch=={TORCH_VERSION})")
    root = Path(list(spec.submodule_search_locations)[0]).parent
    path = root / rel
    if not path.is_file():
        raise GenerationError(f"{path} not found in the installed torch")
    return path


def installed_torch_version() -> str | None:
    import importlib.metadata

    try:
        return importlib.metadata.version("torch")
    except importlib.metadata.PackageNotFoundError:
        return None


def gather_inputs(args: argparse.Namespace) -> Inputs:
    wheel_path = ensure_wheel(args.wheel, args.wheel_cache, args.offline)
    wheel, wheel_shas = read_wheel(wheel_path)

    torch_files = {}
    torch_meta = {}
    overrides = {NATIVE_FUNCTIONS_REL: args.native_functions, TORCH_CUDA_INIT_REL: args.torch_cuda_init}
    for rel, override in overrides.items():
        path = Path(override) if override else find_torch_file(rel)
        data = path.read_bytes()
        digest = sha256_bytes(data)
        pinned = TORCH_PINNED_SHA256[rel]
        if digest != pinned and not args.allow_unpinned_torch:
            raise GenerationError(
                f"{path}: sha256 {digest} differs from the pinned torch {TORCH_VERSION} file ({pinned}). "
                f"Use a torch {TORCH_VERSION} install (or pass --native-functions/--torch-cuda-init), "
                "or --allow-unpinned-torch to build a non-reproducible table."
            )
        torch_files[rel] = data.decode("utf-8")
        torch_meta[rel] = digest
    torch_version = installed_torch_version() if not args.native_functions else None

    shared = Path(args.shared_data)
    sources_md = shared / "SOURCES.md"
    if not sources_md.is_file():
        raise GenerationError(f"{sources_md} not found; pass --shared-data pointing at the shared data snapshot")
    sources = parse_sources_md(sources_md.read_text(encoding="utf-8"))

    def verified(rel: str) -> str:
        path = shared / rel
        if not path.is_file():
            raise GenerationError(f"{path} not found in the shared data snapshot")
        data = path.read_bytes()
        row = sources.get(rel)
        if row is None:
            raise GenerationError(f"{rel} is not listed in {sources_md}")
        if sha256_bytes(data) != row["sha256"]:
            raise GenerationError(f"{path}: sha256 differs from {sources_md}; the snapshot was modified")
        return data.decode("utf-8")

    docs_dir = shared / DOCS_DIR
    doc_files = sorted(p.name for p in docs_dir.glob("*.md"))
    if not doc_files:
        raise GenerationError(f"no *.md files in {docs_dir}")
    docs = {name: verified(f"{DOCS_DIR}/{name}") for name in doc_files}
    tree = hashlib.sha256()
    for name in doc_files:
        tree.update(f"{name}\0{sources[f'{DOCS_DIR}/{name}']['sha256']}\n".encode())
    derivatives = verified(DERIVATIVES_FILE)
    docs_commit = sources[f"{DOCS_DIR}/{doc_files[0]}"]["commit"]
    op_plugin_commit = sources[DERIVATIVES_FILE]["commit"]

    meta = {
        "torch_npu_wheel": {
            "package": "torch-npu",
            "version": TORCH_NPU_VERSION,
            "file": WHEEL_FILE,
            "sha256": WHEEL_SHA256,
            "licence": "BSD-3-Clause",
            "members_sha256": dict(sorted(wheel_shas.items())),
        },
        "torch": {
            "package": "torch",
            "version": TORCH_VERSION,
            "files_sha256": dict(sorted(torch_meta.items())),
            "licence": "BSD-3-Clause",
            "note": "torch-npu 2.14.0's kernel list (codegen yaml) is byte-identical to 2.13.0's; the docs snapshot is for PyTorch 2.13",
        },
        "ascend_pytorch_docs": {
            "repository": "Ascend/pytorch",
            "commit": docs_commit,
            "path": "docs/zh/api/native_api/pytorch_2-13-0",
            "files": len(doc_files),
            "files_sha256_digest": tree.hexdigest(),
            "licence": "CC BY 4.0",
        },
        "op_plugin_derivatives": {
            "repository": "Ascend/op-plugin",
            "commit": op_plugin_commit,
            "path": "op_plugin/config/derivatives.yaml",
            "sha256": sources[DERIVATIVES_FILE]["sha256"],
            "licence": "BSD-3-Clause",
            "version_key": "v" + ".".join(TORCH_NPU_VERSION.split(".")[:2]),
        },
    }
    if torch_version is not None and torch_version.split("+")[0] != TORCH_VERSION and not args.allow_unpinned_torch:
        raise GenerationError(f"installed torch is {torch_version}, the table is pinned to torch {TORCH_VERSION}")
    return Inputs(
        wheel=wheel,
        native_functions=torch_files[NATIVE_FUNCTIONS_REL],
        torch_cuda_init=torch_files[TORCH_CUDA_INIT_REL],
        docs=docs,
        derivatives=derivatives,
        meta=meta,
        docs_commit=docs_commit,
        op_plugin_commit=op_plugin_commit,
    )


def output_name(version: str = TORCH_NPU_VERSION) -> str:
    return f"torch_npu-{version}.json"


def write_atomic(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=path.name + ".", dir=str(path.parent))
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--shared-data", default=str(REPO_ROOT.parent / "shared" / "data"),
                        help="shared data snapshot (default: ../shared/data relative to the repository root)")
    parser.add_argument("--wheel", type=Path, help=f"path to {WHEEL_FILE} (default: the wheel cache)")
    parser.add_argument("--wheel-cache", type=Path, default=DEFAULT_WHEEL_CACHE,
                        help="where the pinned wheel is cached/downloaded (default: %(default)s)")
    parser.add_argument("--offline", action="store_true", help="never download; fail if the wheel is not cached")
    parser.add_argument("--native-functions", help="torch native_functions.yaml (default: from the installed torch)")
    parser.add_argument("--torch-cuda-init", help="torch/cuda/__init__.py (default: from the installed torch)")
    parser.add_argument("--allow-unpinned-torch", action="store_true",
                        help="accept torch files whose sha256 differs from the pins (output not reproducible)")
    parser.add_argument("--output-dir", type=Path, default=REPO_ROOT / "op_coverage",
                        help=f"where to write {output_name()} (default: %(default)s)")
    parser.add_argument("--check", action="store_true", help="do not write; exit 1 if the table would change")
    args = parser.parse_args(argv)
    try:
        table = build_table(gather_inputs(args))
    except GenerationError as exc:
        print(f"generate.py: error: {exc}", file=sys.stderr)
        return 2
    data = dump_table(table)
    target = args.output_dir / output_name()
    if args.check:
        current = target.read_bytes() if target.is_file() else b""
        if current != data:
            print(f"{target} is stale; run: python op_coverage/generate.py", file=sys.stderr)
            return 1
        print(f"{target} is up to date ({len(data)} bytes)")
        return 0
    write_atomic(target, data)
    print(f"wrote {target} ({len(data)} bytes, {table['counts']['entries']} entries)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
