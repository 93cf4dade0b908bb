"""Reference for ``xformers.ops.fmha.memory_efficient_attention``.

``out = softmax(scale * Q K^T + attn_bias) V`` with ``scale`` defaulting to ``1/sqrt(K)`` and
dropout ``p`` on the probabilities. Layouts: BMHK (4-D), BMK (3-D, one head) and BMGHK (5-D,
grouped heads for GQA). ``attn_bias``: None, a tensor broadcastable to (B, H, M, N) ((B, M, N)
for BMK, (B, G, H, M, N) for BMGHK), or an ``attn_bias.AttentionBias``. Computed in float32,
returned in the query dtype (or ``output_dtype``); ``op`` is ignored; dropout uses torch's RNG.
"""

from __future__ import annotations

from ...._attention import attention_bshd
from . import attn_bias
from .attn_bias import AttentionBias, LowerTriangularFromBottomRightMask, LowerTriangularMask

__all__ = [
    "memory_efficient_attention",
    "attn_bias",
    "AttentionBias",
    "LowerTriangularMask",
    "LowerTriangularFromBottomRightMask",
]


def memory_efficient_attention(query, key, value, attn_bias=None, p=0.0, scale=None, *, op=None, output_dtype=None):
    ndim = query.dim()
    if ndim == 3:  # BMK -> BM1K
        query, key, value = query.unsqueeze(2), key.unsqueeze(2), value.unsqueeze(2)
    elif ndim == 5:  # BMGHK -> BM(G*H)K
        b, m, g, h, _ = query.shape
        query, key, value = (t.reshape(t.shape[0], t.shape[1], g * h, t.shape[-1]) for t in (query, key, value))
    elif ndim != 4:
        raise ValueError(f"expected BMK, BMHK or BMGHK inputs, got {ndim}-D query")
    if key.shape[2] != query.shape[2]:
        raise ValueError("key/value must have as many heads as query (use BMGHK for GQA)")
    m, n = query.shape[1], key.shape[1]
    keep, bias = None, attn_bias
    if isinstance(attn_bias, AttentionBias):
        keep = attn_bias.keep_mask(m, n, device=query.device)
        bias = attn_bias.tensor_bias()
    if bias is not None:
        if ndim == 3:
            bias = bias.unsqueeze(1) if bias.dim() == 3 else bias
        elif ndim == 5:
            bias = bias.reshape(bias.shape[0], -1, m, n) if bias.dim() == 5 else bias
    out, _, _ = attention_bshd(query, key, value, scale=scale, keep=keep, bias=bias, dropout_p=p)
    if output_dtype is not None:
        out = out.to(output_dtype)
    if ndim == 3:
        return out.squeeze(2)
    if ndim == 5:
        return out.reshape(b, m, g, h, out.shape[-1])
    return out
