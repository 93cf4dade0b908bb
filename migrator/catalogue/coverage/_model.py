"""Value types of the coverage API (standard library only)."""

from __future__ import annotations

from dataclasses import asdict, dataclass

__all__ = ["CoverageEntry", "CoverageError", "STATUSES", "KERNELS"]

#: Possible ``CoverageEntry.status`` values, best to worst.
STATUSES = ("supported", "partial", "unverified", "cpu_fallback", "unsupported")

#: Possible ``CoverageEntry.kernel`` values (the ATen-layer signal).
KERNELS = (
    "npu_kernel",
    "npu_kernel_via_delegate",
    "decomposes",
    "composite_explicit",
    "cpu_fallback",
    "none",
    "unknown",
)


class CoverageError(ValueError):
    """Bad argument (SoC, version, dtype) or a missing / corrupt coverage table.

    The message is meant for the user as is: it names the valid choices or what to do.
    """


@dataclass(frozen=True)
class CoverageEntry:
    """What the coverage table says about one API on one SoC.

    ``status`` is one of :data:`STATUSES`; ``kernel`` one of :data:`KERNELS`. ``dtypes`` is the
    documented dtype list (empty = not documented). ``bf16_undocumented`` marks a known
    documentation gap (bf16 missing from the list although the op runs on the NPU): info only.
    """

    name: str
    status: str
    soc: str
    dtypes: tuple[str, ...] = ()
    bf16_undocumented: bool = False
    kernel: str = "unknown"
    npu_name: str | None = None
    flags: tuple[str, ...] = ()
    note: str = ""
    source: str = ""
    # -- extra facts (not needed by most callers) --
    version: str = ""
    aten: str | None = None
    limits: tuple[str, ...] = ()
    more_limits: int = 0
    dtypes_excluded: tuple[str, ...] = ()
    signature: str | None = None
    origin: str = "unlisted"
    known: bool = True
    dtype: str | None = None

    def to_dict(self) -> dict:
        """JSON-ready dict (tuples become lists)."""
        out = asdict(self)
        for key, value in out.items():
            if isinstance(value, tuple):
                out[key] = list(value)
        return out
