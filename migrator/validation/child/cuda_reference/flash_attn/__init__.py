"""CPU reference stand-in for the ``flash_attn`` package (see ``flash_attn_interface``)."""

# The flash-attn API level this reference follows (bottom-right causal needs >= 2.1).
__version__ = "2.8.3"
# Lets callers tell the stand-in from the real CUDA package.
__cuda_reference__ = True

from .flash_attn_interface import (  # noqa: E402
    flash_attn_func,
    flash_attn_kvpacked_func,
    flash_attn_qkvpacked_func,
    flash_attn_varlen_func,
    flash_attn_varlen_kvpacked_func,
    flash_attn_varlen_qkvpacked_func,
    flash_attn_with_kvcache,
)

__all__ = [
    "flash_attn_func",
    "flash_attn_kvpacked_func",
    "flash_attn_qkvpacked_func",
    "flash_attn_varlen_func",
    "flash_attn_varlen_kvpacked_func",
    "flash_attn_varlen_qkvpacked_func",
    "flash_attn_with_kvcache",
]
