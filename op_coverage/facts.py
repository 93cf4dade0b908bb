"""Pinned versions, file names and the fixed vocabularies of the op-coverage table, plus small helpers
every generator module shares."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable
from pathlib import Path

import yaml

from migrator.catalogue.coverage._dtypes import DTYPE_BLIND_APIS as _DTYPE_BLIND_APIS
from migrator.catalogue.coverage._names import DTYPES

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
SOC_TERMS = {
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
    "torch.fx.",
    "torch.optim.lr_scheduler.",
    "torch.utils.data.",
    "torch.testing.",
    "torch.distributed.GradBucket",
    "torch.Sym",
    "torch.sym_",
)

#: Integer dtypes: a module's documented list holding only these is about its index input.
INDEX_DTYPES = frozenset({"uint8", "int8", "int16", "int32", "int64"})

#: Tensor APIs that compute nothing on the elements (metadata, autograd bookkeeping, a pass-through
#: module): the docs give them the "`input` fp32 only" line of their test, but no kernel runs on the
#: elements, so a dtype-only limit there is not a limit (bf16 `nn.Identity`, `x.size()`).
DTYPE_BLIND_APIS = _DTYPE_BLIND_APIS

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


def short_commit(commit: str) -> str:
    return commit[:7] if re.fullmatch(r"[0-9a-f]{40}", commit or "") else (commit or "unknown")


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def yaml_load(text: str):
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    return yaml.load(text, Loader=loader)


def op_name_of(entry) -> str:
    """``"abs.out(Tensor self, ...) -> Tensor"`` / ``{"func": ...}`` / ``"abs"`` -> ``"abs.out"``."""
    text = entry["func"] if isinstance(entry, dict) else entry
    return str(text).split("(", 1)[0].strip()


def sorted_dtypes(values: Iterable[str]) -> list[str]:
    order = {d: i for i, d in enumerate(DTYPES)}
    return sorted(set(values), key=lambda d: (order.get(d, len(order)), d))


def has_cjk(text: str) -> bool:
    return bool(_CJK.search(text))


