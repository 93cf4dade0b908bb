"""Pure-PyTorch reference for ``flash_attn.flash_attn_interface`` (flash-attn 2.x API).

Formula (flash-attn README): ``softmax(softmax_scale * Q K^T) V`` with
* layout (B, S, H, D) for the padded API and (total_tokens, H, D) + ``cu_seqlens`` for varlen;
* GQA/MQA: Hq a multiple of Hkv, query head h reads kv head ``h // (Hq // Hkv)``;
* ``causal=True`` aligned to the BOTTOM-RIGHT corner (flash-attn >= 2.1): query i sees key j iff
  ``j <= i + Skv - Sq``; rows with no visible key return 0 (lse ``+inf``);
* ``window_size=(left, right)`` keeps ``i + Skv - Sq - left <= j <= i + Skv - Sq + right``;
* ``softcap > 0``: scores become ``softcap * tanh(scores / softcap)`` before masking;
* ``alibi_slopes`` (H,) or (B, H): bias ``-slope * |i + Skv - Sq - j|``.

Differences from the CUDA kernels, on purpose: float32 inputs are accepted (the kernels take
fp16/bf16 only) so an fp32 golden run can use the same code; dropout draws from torch's RNG, not
the kernel's Philox stream, so dropout masks never match a GPU run; ``deterministic`` is ignored
(this code is always deterministic); ``flash_attn_with_kvcache`` is not provided.
"""

from __future__ import annotations

import torch

from .._attention import alibi_bias, attention_bshd, band_keep_mask

__all__ = [
    "flash_attn_func",
    "flash_attn_kvpacked_func",
    "flash_attn_qkvpacked_func",
    "flash_attn_varlen_func",
    "flash_attn_varlen_kvpacked_func",
    "flash_attn_varlen_qkvpacked_func",
    "flash_attn_with_kvcache",
]


def _check(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> None:
    if not (q.dtype == k.dtype == v.dtype):
        raise RuntimeError("query, key and value must have the same dtype")
    if q.shape[-1] != k.shape[-1]:
        raise RuntimeError("query and key must have the same head dimension")
    if k.shape[:-1] != v.shape[:-1]:
        raise RuntimeError("key and value must have the same batch, sequence and head sizes")


def _attn(q, k, v, dropout_p, softmax_scale, causal, window_size, softcap, alibi_slopes):
    """One padded batch (B, S, H, D) -> (out, lse (B, H, Sq), S_dmask (B, H, Sq, Skv))."""
    sq, skv = q.shape[1], k.shape[1]
    keep = band_keep_mask(sq, skv, causal=causal, window_size=tuple(window_size), device=q.device)
    bias = None if alibi_slopes is None else alibi_bias(alibi_slopes, sq, skv)
    return attention_bshd(
        q, k, v, scale=softmax_scale, keep=keep, bias=bias, softcap=softcap, dropout_p=dropout_p
    )


def flash_attn_func(
    q,
    k,
    v,
    dropout_p=0.0,
    softmax_scale=None,
    causal=False,
    window_size=(-1, -1),
    softcap=0.0,
    alibi_slopes=None,
    deterministic=False,
    return_attn_probs=False,
):
    """q (B, Sq, Hq, D), k/v (B, Skv, Hkv, D) -> out (B, Sq, Hq, D) [, softmax_lse, S_dmask]."""
    _check(q, k, v)
    out, lse, probs = _attn(q, k, v, dropout_p, softmax_scale, causal, window_size, softcap, alibi_slopes)
    return (out, lse, probs) if return_attn_probs else out


def flash_attn_kvpacked_func(
    q, kv, dropout_p=0.0, softmax_scale=None, causal=False, window_size=(-1, -1), softcap=0.0,
    alibi_slopes=None, deterministic=False, return_attn_probs=False,
):
    """kv (B, Skv, 2, Hkv, D)."""
    return flash_attn_func(
        q, kv[:, :, 0], kv[:, :, 1], dropout_p, softmax_scale, causal, window_size, softcap,
        alibi_slopes, deterministic, return_attn_probs,
    )


def flash_attn_qkvpacked_func(
    qkv, dropout_p=0.0, softmax_scale=None, causal=False, window_size=(-1, -1), softcap=0.0,
    alibi_slopes=None, deterministic=False, return_attn_probs=False,
):
    """qkv (B, S, 3, H, D)."""
    return flash_attn_func(
        qkv[:, :, 0], qkv[:, :, 1], qkv[:, :, 2], dropout_p, softmax_scale, causal, window_size,
        softcap, alibi_slopes, deterministic, return_attn_probs,
    )


def flash_attn_varlen_func(
    q,
    k,
    v,
    cu_seqlens_q,
    cu_seqlens_k,
    max_seqlen_q,
    max_seqlen_k,
    dropout_p=0.0,
    softmax_scale=None,
    causal=False,
    window_size=(-1, -1),
    softcap=0.0,
    alibi_slopes=None,
    deterministic=False,
    return_attn_probs=False,
    block_table=None,
):
    """q (total_q, Hq, D), k/v (total_k, Hkv, D); sequence b is rows ``cu_seqlens[b]:cu_seqlens[b+1]``.

    Causal alignment is bottom-right *per sequence*. Returns out (total_q, Hq, D)
    [, softmax_lse (Hq, total_q), S_dmask (B, Hq, max_seqlen_q, max_seqlen_k) zero-padded].
    """
    if block_table is not None:
        raise NotImplementedError("paged KV (block_table) is not supported by the CPU reference")
    _check(q, k, v)
    cq = [int(x) for x in cu_seqlens_q.tolist()]
    ck = [int(x) for x in cu_seqlens_k.tolist()]
    if len(cq) != len(ck):
        raise RuntimeError("cu_seqlens_q and cu_seqlens_k must have the same length")
    args = (dropout_p, softmax_scale, causal, window_size, softcap, alibi_slopes)
    if cq[-1] * ck[-1] * q.shape[1] <= PACKED_SCORE_LIMIT:
        out, lse, probs = _varlen_packed(q, k, v, cq, ck, *args)
        per_seq = [probs[:, cq[b] : cq[b + 1], ck[b] : ck[b + 1]] for b in range(len(cq) - 1)]
    else:
        out, lse, per_seq = _varlen_loop(q, k, v, cq, ck, *args)
    if not return_attn_probs:
        return out
    s_dmask = q.new_zeros(len(per_seq), q.shape[1], int(max_seqlen_q), int(max_seqlen_k), dtype=torch.float32)
    for b, p in enumerate(per_seq):
        s_dmask[b, :, : p.shape[1], : p.shape[2]] = p
    return out, lse, s_dmask


# Above this many fp32 scores (total_q * total_k * heads) varlen loops over sequences instead of
# building one block-diagonal score matrix (memory); both give the same result.
PACKED_SCORE_LIMIT = 1 << 24


def _varlen_packed(q, k, v, cq, ck, dropout_p, softmax_scale, causal, window_size, softcap, alibi_slopes):
    """All sequences in one (1, H, Tq, Tk) score matrix with a block-diagonal band mask."""
    dev = q.device
    cq_t, ck_t = torch.tensor(cq, device=dev), torch.tensor(ck, device=dev)
    seg_q = torch.searchsorted(cq_t[1:], torch.arange(cq[-1], device=dev), right=True)
    seg_k = torch.searchsorted(ck_t[1:], torch.arange(ck[-1], device=dev), right=True)
    shift = ck_t.diff() - cq_t.diff()  # bottom-right alignment, per sequence
    i = torch.arange(cq[-1], device=dev) - cq_t[seg_q] + shift[seg_q]
    j = torch.arange(ck[-1], device=dev) - ck_t[seg_k]
    keep = seg_q[:, None] == seg_k[None, :]
    left, right = window_size
    if causal:
        right = 0
    if right >= 0:
        keep &= j[None, :] <= i[:, None] + right
    if left >= 0:
        keep &= j[None, :] >= i[:, None] - left
    bias = None
    if alibi_slopes is not None:
        dist = (i[:, None] - j[None, :]).abs().float()
        slopes = alibi_slopes.float()
        slopes = slopes[:, None] if slopes.dim() == 1 else slopes[seg_q].T  # (H, 1) or (H, Tq)
        bias = (-slopes[:, :, None] * dist).unsqueeze(0)
    out, lse, p = attention_bshd(q[None], k[None], v[None], scale=softmax_scale, keep=keep, bias=bias,
                                 softcap=softcap, dropout_p=dropout_p)
    return out[0], lse[0], p[0]


def _varlen_loop(q, k, v, cq, ck, dropout_p, softmax_scale, causal, window_size, softcap, alibi_slopes):
    outs, lses, probs = [], [], []
    for b in range(len(cq) - 1):
        slopes = alibi_slopes
        if slopes is not None and slopes.dim() == 2:
            slopes = slopes[b]
        o, lse, p = _attn(
            q[cq[b] : cq[b + 1]].unsqueeze(0), k[ck[b] : ck[b + 1]].unsqueeze(0),
            v[ck[b] : ck[b + 1]].unsqueeze(0), dropout_p, softmax_scale, causal, window_size,
            softcap, slopes,
        )
        outs.append(o[0])
        lses.append(lse[0])
        probs.append(p[0])
    return torch.cat(outs, dim=0), torch.cat(lses, dim=1), probs


def flash_attn_varlen_kvpacked_func(
    q, kv, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, dropout_p=0.0,
    softmax_scale=None, causal=False, window_size=(-1, -1), softcap=0.0, alibi_slopes=None,
    deterministic=False, return_attn_probs=False,
):
    """kv (total_k, 2, Hkv, D)."""
    return flash_attn_varlen_func(
        q, kv[:, 0], kv[:, 1], cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, dropout_p,
        softmax_scale, causal, window_size, softcap, alibi_slopes, deterministic, return_attn_probs,
    )


def flash_attn_varlen_qkvpacked_func(
    qkv, cu_seqlens, max_seqlen, dropout_p=0.0, softmax_scale=None, causal=False,
    window_size=(-1, -1), softcap=0.0, alibi_slopes=None, deterministic=False,
    return_attn_probs=False,
):
    """qkv (total, 3, H, D)."""
    return flash_attn_varlen_func(
        qkv[:, 0], qkv[:, 1], qkv[:, 2], cu_seqlens, cu_seqlens, max_seqlen, max_seqlen,
        dropout_p, softmax_scale, causal, window_size, softcap, alibi_slopes, deterministic,
        return_attn_probs,
    )


def flash_attn_with_kvcache(*args, **kwargs):
    """Inference-only KV-cache kernel: importable so modules load, but not emulated."""
    raise NotImplementedError("flash_attn_with_kvcache is not provided by the CPU reference")
