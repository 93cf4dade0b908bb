"""One-line answers for the report's op table: what an op runs as on the NPU, and why it has its status."""

from __future__ import annotations

from ._model import CoverageEntry

__all__ = ["runs_as", "status_reason"]

_KERNEL_LABEL = {
    "npu_kernel": "NPU kernel",
    "npu_kernel_via_delegate": "NPU kernel (via its delegate)",
    "decomposes": "decomposes into other ATen ops",
    "composite_explicit": "composite implementation",
    "cpu_fallback": "CPU fallback",
}


def runs_as(entry: CoverageEntry) -> str:
    """`torch_npu.npu_rms_norm`, or `aten::matmul (NPU kernel)`; empty when the table knows nothing."""
    if entry.npu_name:
        return entry.npu_name
    label = _KERNEL_LABEL.get(entry.kernel, "")
    if entry.aten:
        return f"aten::{entry.aten}" + (f" ({label})" if label else "")
    return label


def status_reason(entry: CoverageEntry) -> str:
    """Why the status: the documented limits of a `partial` op, what makes an op unverified, ..."""
    if entry.status == "partial":
        parts = list(entry.limits[:2])
        more = len(entry.limits) - 2 + entry.more_limits if len(entry.limits) > 2 else entry.more_limits
        if more:
            parts.append(f"{more} more limit{'s' if more != 1 else ''} in the Ascend docs")
        if entry.dtypes_excluded:
            parts.append("not for " + ", ".join(entry.dtypes_excluded))
        if entry.bf16_undocumented:
            parts.append("bf16 not in the documented dtypes (the NPU kernel exists)")
        if not parts:
            return "the Ascend docs say “with limits” but name none beyond the dtype list"
        return "; ".join(parts)
    if entry.status == "unverified":
        label = _KERNEL_LABEL.get(entry.kernel)
        return "not in the Ascend support list" + (f"; its ATen op: {label}" if label else "")
    if entry.status == "cpu_fallback":
        return "no NPU kernel: runs on the CPU (slow, host copies)"
    if entry.status == "unsupported":
        return entry.note.split(". ")[0].rstrip(".") if entry.note else "not supported"
    return "in the Ascend support list" + (f"; limits: {'; '.join(entry.limits[:2])}" if entry.limits else "")
