"""Reference for ``xformers.ops.fmha.attn_bias`` (the causal masks training code uses).

xformers semantics: ``LowerTriangularMask`` is aligned to the TOP-LEFT corner (query i sees keys
j <= i, like SDPA ``is_causal``); ``LowerTriangularFromBottomRightMask`` to the BOTTOM-RIGHT corner
(j <= i + N - M, like flash-attn >= 2.1). Both are identical when M == N.
"""

from __future__ import annotations

import torch

from ...._attention import band_keep_mask

__all__ = [
    "AttentionBias",
    "LowerTriangularMask",
    "LowerTriangularFromBottomRightMask",
    "LowerTriangularMaskWithTensorBias",
]


class AttentionBias:
    """Base class: a bias that can be materialised as an additive (..., M, N) tensor."""

    def keep_mask(self, m: int, n: int, device=None) -> torch.Tensor | None:
        return None

    def tensor_bias(self) -> torch.Tensor | None:
        return None

    def materialize(self, shape, dtype=torch.float32, device="cpu") -> torch.Tensor:
        m, n = shape[-2], shape[-1]
        out = torch.zeros(shape, dtype=dtype, device=device)
        keep = self.keep_mask(m, n, device=device)
        if keep is not None:
            out = out.masked_fill(~keep, float("-inf"))
        bias = self.tensor_bias()
        if bias is not None:
            out = out + bias.to(dtype=dtype, device=device)
        return out


class LowerTriangularMask(AttentionBias):
    """Causal mask, top-left aligned."""

    _bottom_right = False

    def __init__(self, *args, **kwargs) -> None:
        pass

    def keep_mask(self, m, n, device=None):
        return band_keep_mask(m, n, causal=True, bottom_right=self._bottom_right, device=device)

    def add_bias(self, bias: torch.Tensor) -> LowerTriangularMaskWithTensorBias:
        return LowerTriangularMaskWithTensorBias(bias)


class LowerTriangularFromBottomRightMask(LowerTriangularMask):
    """Causal mask, bottom-right aligned."""

    _bottom_right = True


class LowerTriangularMaskWithTensorBias(LowerTriangularMask):
    """Top-left causal mask plus an additive tensor bias."""

    def __init__(self, bias: torch.Tensor) -> None:
        self._bias = bias

    def tensor_bias(self):
        return self._bias
