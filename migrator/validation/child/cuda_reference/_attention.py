"""Explicit-formula attention shared by the flash_attn and xformers references.

Everything here is plain PyTorch in the (B, S, H, D) layout that flash-attn and xformers use.
Precision as the CUDA kernels round: Q·Kᵀ of 16-bit inputs accumulates in float32, softmax in
float32, P is rounded to the input dtype before the P·V matmul (flash-attn's forward kernel
converts ``acc_s`` to the element type for the second GEMM, csrc/flash_attn/src/flash_fwd_kernel.h
``convert_type<Element>``), P·V accumulates in float32 and the output is rounded once. The
rounding's backward is the identity. Autograd comes from the torch ops.
"""

from __future__ import annotations

import math

import torch

from .. import dropout as _dropout

__all__ = ["band_keep_mask", "alibi_bias", "expand_kv_heads", "attention_bshd"]


def band_keep_mask(
    seqlen_q: int,
    seqlen_k: int,
    *,
    causal: bool,
    window_size: tuple[int, int] = (-1, -1),
    bottom_right: bool = True,
    device: torch.device | None = None,
) -> torch.Tensor | None:
    """Boolean (Sq, Skv) mask, True = query i may attend key j; None = attend everything.

    Bottom-right alignment (flash-attn >= 2.1, xformers ``...FromBottomRightMask``) shifts the
    diagonal by ``Skv - Sq`` so the last query sees the last key; top-left (SDPA ``is_causal``,
    xformers ``LowerTriangularMask``) uses shift 0. ``window_size=(left, right)`` keeps keys in
    ``[i + shift - left, i + shift + right]``; -1 means unbounded; ``causal`` forces right = 0.
    """
    left, right = window_size
    if causal:
        right = 0
    if left < 0 and right < 0:
        return None
    shift = seqlen_k - seqlen_q if bottom_right else 0
    i = torch.arange(seqlen_q, device=device).unsqueeze(1) + shift
    j = torch.arange(seqlen_k, device=device).unsqueeze(0)
    keep = torch.ones(seqlen_q, seqlen_k, dtype=torch.bool, device=device)
    if right >= 0:
        keep &= j <= i + right
    if left >= 0:
        keep &= j >= i - left
    return keep


def alibi_bias(slopes: torch.Tensor, seqlen_q: int, seqlen_k: int) -> torch.Tensor:
    """flash-attn ALiBi: ``-slope * |i + Skv - Sq - j|``; slopes (H,) or (B, H) -> (B|1, H, Sq, Skv)."""
    slopes = slopes.float()
    if slopes.dim() == 1:
        slopes = slopes.unsqueeze(0)
    i = torch.arange(seqlen_q, device=slopes.device).unsqueeze(1) + (seqlen_k - seqlen_q)
    j = torch.arange(seqlen_k, device=slopes.device).unsqueeze(0)
    dist = (i - j).abs().float()
    return -slopes[:, :, None, None] * dist


def expand_kv_heads(k: torch.Tensor, num_q_heads: int) -> torch.Tensor:
    """GQA/MQA: query head h reads kv head ``h // (Hq // Hkv)`` (dim 2 of BSHD)."""
    hkv = k.shape[2]
    if num_q_heads % hkv != 0:
        raise RuntimeError("Number of heads in key/value must divide number of heads in query")
    return k if hkv == num_q_heads else k.repeat_interleave(num_q_heads // hkv, dim=2)



def _no_values(t) -> bool:
    """A FakeTensor (`migrate ops --trace --fake`) has no values to branch on: take the masked path."""
    from torch._subclasses.fake_tensor import FakeTensor

    return isinstance(t, FakeTensor)

def attention_bshd(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    *,
    scale: float | None = None,
    keep: torch.Tensor | None = None,
    bias: torch.Tensor | None = None,
    softcap: float = 0.0,
    dropout_p: float = 0.0,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """softmax(scale * q k^T [softcapped] + bias, masked by ``keep``) @ v.

    q (B, Sq, Hq, D), k/v (B, Skv, Hkv, D[v]). Returns ``(out, lse, probs)``: out (B, Sq, Hq, Dv)
    in q's dtype, lse (B, Hq, Sq) float32 (``+inf`` on rows with no visible key, the flash-attn
    convention), probs (B, Hq, Sq, Skv) after dropout with dropped entries negated (flash-attn's
    ``S_dmask`` encoding). Rows with no visible key produce zeros, and no NaN in the backward.
    """
    hq = q.shape[2]
    k = expand_kv_heads(k, hq)
    v = expand_kv_heads(v, hq)
    if scale is None:
        scale = 1.0 / math.sqrt(q.shape[-1])
    s = torch.einsum("bqhd,bkhd->bhqk", q.float(), k.float()) * scale
    if softcap > 0.0:
        s = softcap * torch.tanh(s / softcap)
    if bias is not None:
        s = s + bias.float()
    empty = None
    if keep is not None:
        s = s.masked_fill(~keep, float("-inf"))
        empty = ~keep.any(dim=-1)  # (..., Sq): rows that see no key at all
        if _no_values(empty) or bool(empty.any()):
            # softmax of an all -inf row is NaN (and so is its gradient): neutralise those rows.
            s = s.masked_fill(empty.unsqueeze(-1), 0.0)
        else:
            empty = None
    lse = torch.logsumexp(s, dim=-1)
    p = torch.softmax(s, dim=-1)
    if empty is not None:
        p = p.masked_fill(empty.unsqueeze(-1), 0.0)
        lse = lse.masked_fill(empty, float("inf"))
    if q.dtype in (torch.float16, torch.bfloat16):  # P enters the second GEMM in the input dtype
        p = p + (p.detach().to(q.dtype).float() - p.detach())
    signed = p
    dropout_p = _dropout.fused("flash_attn(dropout_p)", dropout_p)  # the validation's dropout census
    if dropout_p > 0.0:
        kept = torch.rand(p.shape, device=p.device) >= dropout_p
        signed = torch.where(kept, p, -p).detach()
        p = p * kept / (1.0 - dropout_p)
    out = torch.einsum("bhqk,bkhd->bqhd", p, v.float())
    # contiguous like the CUDA kernel's output: callers `.view()` it (FastChat does)
    return out.to(q.dtype).contiguous(), lse, signed
