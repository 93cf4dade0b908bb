"""The one registry of pattern-rule names (`impl:` in rules/*.yaml): the detections the code implements.

A pattern rule has no symbol list; a checker in engine/ or a rule unit's `detect_*` hook reports it
by this name. A YAML `impl:` that is not listed here is a catalogue error at load (a typo would
otherwise be a rule that never fires), and reporting a name that is not listed is a programming error
(`Catalogue.impl_rule`). `tests/catalogue/test_impls.py` checks each name is reported somewhere.
"""

from __future__ import annotations

KNOWN_IMPLS = frozenset({
    # amp
    "autocast-cuda", "grad-scaler-cuda",
    # apex
    "deepspeed-apex-amp", "fused-optimizer-zero-grad",
    # attention
    "config-flash-attention",
    # coverage
    "op-unsupported", "op-cpu-fallback", "op-partial", "op-unverified", "float64-use", "op-dtype-limit", "op-argument-limit",
    "tensor-method-unknown-receiver", "torch-npu-release", "torch-npu-pairing-unknown",
    # device
    "tensor-cuda-call", "tensor-is-cuda", "device-string", "device-type-compare", "bare-int-device",
    "config-device-cuda", "cuda-tensor-type-string", "lightning-accelerator",
    # distributed
    "nccl-backend-string", "ddp-device-ids", "config-nccl-backend",
    # environment
    "cuda-only-requirement", "cuda-torch-build", "cuda-base-image", "cuda-system-package",
    "scheduler-gpu-request", "torchrun-nproc-gpu", "container-gpu-flag",
    # kernels
    "cuda-extension-build", "cuda-source-file", "nvidia-smi", "deepspeed-fused-op-config",
    "deepspeed-cuda-op-config", "cuda-extension-import", "cuda-extension-call", "cuda-extension-class", "cuda-source-name",
    "triton-gpu-only", "triton-unsupported-dtype", "triton-tuning-knob", "triton-grid-limit", "triton-ub-overflow",
    "triton-dot-allow-tf32",
    # fusion (advice: a hand-written pattern a fused torch_npu op replaces)
    "fusion-rms-norm", "fusion-swiglu", "fusion-rotary", "fusion-attention",
    # perf (static performance lint)
    "host-sync-hot-path", "host-sync-logging", "float64-hot-path", "sync-batchnorm", "dataloader-workers",
    "ascend-launch-blocking", "tensor-print-hot-path", "ascend-debug-log-level", "task-queue-disabled",
    "hccl-algo-set", "dynamic-shape", "aicpu-dtype", "aicpu-op",  # the last three from the op census
    # meta
    "parse-error", "unreadable-file", "bare-suppression", "unused-suppression",
})
