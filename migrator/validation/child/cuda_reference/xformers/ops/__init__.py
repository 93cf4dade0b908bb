"""Reference for ``xformers.ops`` (attention entry points re-exported as upstream does)."""

from . import fmha
from .fmha import memory_efficient_attention
from .fmha.attn_bias import (
    AttentionBias,
    LowerTriangularFromBottomRightMask,
    LowerTriangularMask,
    LowerTriangularMaskWithTensorBias,
)

__all__ = [
    "fmha",
    "memory_efficient_attention",
    "AttentionBias",
    "LowerTriangularMask",
    "LowerTriangularFromBottomRightMask",
    "LowerTriangularMaskWithTensorBias",
]
