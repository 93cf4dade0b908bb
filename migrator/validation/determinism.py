"""Seeds and determinism flags applied by the harness in every child (numerics.md §3.5).

``environment(seed, threads)`` is what the launcher puts into a child's environment before
Python starts (``PYTHONHASHSEED`` only works that way; the HCCL/LCCL and cuBLAS variables must
be set before the libraries initialise). ``apply(...)`` runs first thing in the child and returns
the manifest entry that records what was set. Dropout is turned off only through the program's
own ``make_model(dropout=0.0)``; :func:`dropout_modules` lists any dropout left active.
"""

from __future__ import annotations

import os
import random
from typing import TYPE_CHECKING, TypedDict

if TYPE_CHECKING:
    import torch

#: msprobe's ``seed_all`` set for NPU (§1.1) plus cuBLAS' deterministic workspace (§3.5).
DETERMINISTIC_ENV = {
    "HCCL_DETERMINISTIC": "true",
    "LCCL_DETERMINISTIC": "1",
    "CLOSE_MATMUL_K_SHIFT": "1",
    "ATB_LLM_LCOC_ENABLE": "0",
    "CUBLAS_WORKSPACE_CONFIG": ":4096:8",
}


def environment(seed: int, threads: int) -> dict[str, str]:
    """Environment variables for a child process (set before it starts)."""
    env = dict(DETERMINISTIC_ENV)
    env.update(PYTHONHASHSEED=str(seed), OMP_NUM_THREADS=str(threads), MKL_NUM_THREADS=str(threads))
    return env


def seed_all(seed: int) -> None:
    """Seed python, numpy, torch and the accelerator generators."""
    import torch

    random.seed(seed)
    try:
        import numpy as np

        np.random.seed(seed % 2**32)
    except ImportError:  # pragma: no cover - numpy is a validate dependency
        pass
    torch.manual_seed(seed)
    if torch.cuda.is_available():
        torch.cuda.manual_seed_all(seed)
    npu = getattr(torch, "npu", None)
    if npu is not None and hasattr(npu, "manual_seed_all"):
        npu.manual_seed_all(seed)


class _ManifestCore(TypedDict):
    seed: int
    threads: int
    deterministic_algorithms: bool
    float32_matmul_precision: str
    dropout: str
    env: dict[str, str | None]
    tf32: bool
    cudnn_deterministic: bool
    cudnn_benchmark: bool


class Manifest(_ManifestCore, total=False):
    """What :func:`apply` set, as a side's status records it (``hf32_*`` on NPU only)."""

    hf32_matmul: bool
    hf32_conv: bool


def apply(seed: int, threads: int, device: str) -> Manifest:
    """Apply seeds and flags in this process; return the manifest record of what was set.

    ``device`` is the real device type the side runs on (``cpu``, ``cuda`` or ``npu``): TF32 is
    switched off for CUDA fp32 goldens, HF32 (matmul and conv; conv defaults to on) for NPU.
    """
    import torch

    torch.set_num_threads(threads)
    try:
        torch.set_num_interop_threads(1)
    except RuntimeError:  # already set (a second run in the same process)
        pass
    torch.use_deterministic_algorithms(True, warn_only=True)
    torch.set_float32_matmul_precision("highest")
    flags: Manifest = {
        "seed": seed,
        "threads": threads,
        "deterministic_algorithms": True,
        "float32_matmul_precision": "highest",
        "dropout": "off via make_model(dropout=0.0)",
        "env": {k: os.environ.get(k) for k in sorted(DETERMINISTIC_ENV) + ["PYTHONHASHSEED", "OMP_NUM_THREADS"]},
        # the flags set below, in this order
        "tf32": False, "cudnn_deterministic": True, "cudnn_benchmark": False,
    }
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cudnn.deterministic = True
    torch.backends.cudnn.benchmark = False
    if device == "npu":
        npu = getattr(torch, "npu", None)
        for name in ("matmul", "conv"):
            flag = getattr(npu, name, None)
            if flag is not None and hasattr(flag, "allow_hf32"):
                flag.allow_hf32 = False
        flags["hf32_matmul"] = flags["hf32_conv"] = False
    seed_all(seed)
    return flags


def dropout_modules(model: torch.nn.Module) -> list[str]:
    """Names of dropout modules with ``p > 0`` (should be none after ``make_model(dropout=0.0)``)."""
    import torch

    found = []
    for name, module in model.named_modules():
        if isinstance(module, torch.nn.modules.dropout._DropoutNd) and module.p > 0:
            found.append(f"{name or '<root>'} (p={module.p})")
    return found
