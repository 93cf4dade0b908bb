"""Device peak dense TFLOP/s per dtype, for MFU (``migrate validate --bench``). No torch here.

Every entry carries a public source. A device that is not in the table (or whose exact variant
cannot be told from its name) gets no peak: MFU is reported as "n/a: unknown peak", never a
guessed number. ``--peak-tflops`` overrides the table. CPU runs have no peak: they prove the
measurement machinery, not hardware speed.

Left out on purpose: Huawei Ascend 910B / 910C (no first-party public BF16 figure found; the
numbers in circulation come from third-party articles), the 2019 Ascend 910 (Huawei's launch
figure is FP16 only, 256 TFLOPS, and its device-name strings could not be checked), NVIDIA
H100 PCIe / NVL and H200 NVL (different clocks and power limits than the SXM parts listed).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TypedDict


@dataclass(frozen=True)
class Peak:
    device: str
    pattern: str                 # regex on the device name (torch.cuda/npu.get_device_name)
    tflops: dict[str, float]     # dense (no 2:4 sparsity) tensor-core peak per dtype
    source: str

    def matches(self, name: str) -> bool:
        return re.search(self.pattern, name or "", re.IGNORECASE) is not None


class _PeakCore(TypedDict):
    tflops: float | None  # None: no MFU (CPU run, unknown device or dtype)
    device: str | None


class PeakFigure(_PeakCore, total=False):
    """The peak MFU is measured against: its ``source`` when known, else ``why`` there is none."""

    source: str
    why: str


# Datasheets quote BF16/FP16 "with sparsity"; the dense figure is half of it.
PEAKS: tuple[Peak, ...] = (
    Peak("NVIDIA H100 SXM5", r"H100(?!.*(PCIe|NVL))", {"bfloat16": 989.4, "float16": 989.4},
         "NVIDIA H100 Tensor Core GPU datasheet (https://www.nvidia.com/en-us/data-center/h100/): BF16/FP16 "
         "Tensor Core 1,979 TFLOPS with sparsity for H100 SXM, i.e. 989.4 dense; dense matrix BF16 989.4 also "
         "tabulated at https://glennklockwood.com/garden/processors/h100"),
    Peak("NVIDIA H200 SXM", r"H200(?!.*NVL)", {"bfloat16": 989.4, "float16": 989.4},
         "NVIDIA H200 Tensor Core GPU page (https://www.nvidia.com/en-us/data-center/h200/): BF16/FP16 Tensor Core "
         "1,979 TFLOPS with sparsity for H200 SXM (same GH100 compute as H100 SXM), i.e. ~989 dense"),
    Peak("NVIDIA A100", r"A100", {"bfloat16": 312.0, "float16": 312.0},
         "NVIDIA A100 Tensor Core GPU datasheet (https://www.nvidia.com/en-us/data-center/a100/): BF16/FP16 "
         "Tensor Core 312 TFLOPS dense (624 with sparsity), SXM and PCIe alike"),
)


def lookup(device_name: str | None, dtype: str, override: float | None = None) -> PeakFigure:
    """The peak TFLOPS for MFU on ``device_name`` in ``dtype`` (``override`` wins)."""
    if override is not None:
        return {"tflops": float(override), "device": device_name, "source": "--peak-tflops (user override)"}
    if not device_name or device_name.lower().startswith("cpu") or "emulated" in device_name.lower():
        return {"tflops": None, "device": device_name,
                "why": "n/a: CPU run"}
    for peak in PEAKS:
        if peak.matches(device_name):
            value = peak.tflops.get(dtype)
            if value is None:
                return {"tflops": None, "device": peak.device, "why": f"n/a: no sourced {dtype} peak for {peak.device}"}
            return {"tflops": value, "device": peak.device, "source": peak.source}
    return {"tflops": None, "device": device_name, "why": "n/a: unknown peak (give --peak-tflops)"}
