"""Emulated ``torch_npu.npu_fusion_attention`` (ascend-facts §c.1, §c.5) in plain PyTorch.

``out = Dropout(Softmax(Mask(scale·(pse + Q·Kᵀ), atten_mask)), keep_prob) · V``

Semantics implemented (each from ascend-facts §c.1 unless noted):

* layouts ``BSH, SBH, BSND, BNSD, TND``; output has the input layout with ``Dv``;
  GQA/MQA: query head ``h`` uses key/value head ``h // (Nq / Nkv)``;
* ``atten_mask`` is bool or uint8 with **True/1 = masked out**; shapes ``BNSS, B1SS, 11SS, SS``
  (varlen: ``SS`` = maxSq × maxSkv, the top-left ``Sq_i × Skv_i`` block is used per sequence).
  Other dtypes (e.g. an SDPA-style additive float mask) raise ``TypeError``;
* ``scale`` defaults to **1.0** (not 1/√D); ``pse`` is added before scaling;
* ``sparse_mode``: 0 given mask OR'ed with the top-left band ``j − i > next_tockens or
  i − j > pre_tockens`` (no mask → full attention, pre/next ignored); 1 given mask only;
  2 leftUpCausal ``triu(ones(Sq, Skv), 1)``; 3 rightDownCausal ``triu(ones(Sq, Skv), Skv − Sq + 1)``;
  4 band with a bottom-right origin: masked iff ``j > i + (Skv − Sq) + next`` or
  ``j < i + (Skv − Sq) − pre`` (Ascend/op-plugin ``docs/zh/custom_APIs/torch_npu/torch_npu-npu_fusion_
  attention.md``: mode 4 "参数起点为右下角"; its mode-7 example, a 2×6 block with pre=6, next=−2 that must
  equal rows 0–1 of a 4×6 rightDownCausal mask, holds only with that origin. msprobe's CPU bench
  ``triu(k=next+1)+tril(k=−pre−1)`` is top-left: it agrees only when Sq = Skv); 5 prefix non-compressed:
  the given BNSS/B1SS mask; 6 prefix compressed: rightDownCausal OR'ed open for ``j < prefix[b]``;
  7/8 (TND only): every sequence rightDownCausal (7) / leftUpCausal (8) except the last (7) / first
  (8) non-empty one, which is the bottom-right band given by pre/next_tockens;
* modes 2, 3, 4, 7, 8 **require** the compressed mask ``torch.triu(torch.ones(2048, 2048),
  diagonal=1).bool()`` (mode 6: the 3072×2048 prefix mask), exactly like the real op; a mask of any
  other shape — e.g. an ``Sq×Skv`` causal mask with mode 3 — raises ``ValueError``;
* ``actual_seq_qlen/kvlen`` (TND): host int lists of cumulative lengths **without** a leading 0;
  a repeated value is an empty sequence; trailing zeros skip trailing sequences; tokens after the
  last cumulative length produce zeros;
* fully masked rows (e.g. mode 3 with Sq > Skv) give output **0** (what the real op does with
  ``inner_precise=2``, which it auto-enables there); their ``softmax_max`` is −inf, ``softmax_sum`` 0;
* returns ``(attention_out, softmax_max fp32, softmax_sum fp32, softmax_out (empty), seed, offset,
  numels)``; softmax_max/sum have shape ``(B, N, Sq, 8)`` (TND: ``(T, N, 8)``), the row value
  repeated 8 times as on the device; they are returned detached;
* autocast: the op runs with CPU autocast disabled (it is not on an autocast list on the device
  either), so an enclosing ``torch.autocast("npu")`` does not lower its internal precision;
* precision, as the device kernel rounds: Q·Kᵀ of 16-bit inputs accumulates in **fp32**, softmax
  in fp32, P is rounded to the input dtype for the P·V matmul (16-bit Cube operands, as in
  flash-attn's kernel), P·V accumulates in fp32, the output is rounded once. The rounding's backward
  is the identity (grads are rounded where they leave the op); fp32/fp64 inputs keep their precision;
* autograd: differentiable torch ops, gradients for query, key, value, pse and sink (as
  derivatives.yaml lists);
* dropout (``keep_prob < 1``): mask drawn from a ``torch.Generator`` seeded with ``seed`` (or,
  when ``seed == 0``, a seed drawn from the default CPU generator, which is returned), combined
  with ``offset``; ``numels`` = number of mask elements. Reproducible on CPU, not bit-equal to the
  device's Philox stream. A given ``dropout_mask`` (bool/uint8, nonzero = keep) must be unpacked
  with shape (B, N, Sq, Skv);
* ``padding_mask`` is not supported by torch_npu either (→ ``NotImplementedError``);
  ``inner_precise``, ``gen_mask_parallel``, ``sync`` and ``softmax_layout`` are accepted and ignored.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence

import torch

from .. import dropout as _dropout
from .attention_masks import (
    _band_bottom_right,
    _band_top_left,
    _check_compressed_mask,
    _check_mask_dtype,
    _ij,
    _left_up_causal,
    _or,
    _right_down_causal,
    _user_mask_4d,
)

LAYOUTS = ("BSH", "SBH", "BSND", "BNSD", "TND")
_COMPRESSED_MODES = (2, 3, 4, 7, 8)
_INT_MAX = 2147483647


# ---------------------------------------------------------------------------------- helpers
def _to_bnsd(x: torch.Tensor, layout: str, n: int) -> torch.Tensor:
    if layout == "BNSD":
        return x
    if layout == "BSND":
        return x.transpose(1, 2)
    if layout == "BSH":
        b, s, h = x.shape
        return x.view(b, s, n, h // n).transpose(1, 2)
    # SBH
    s, b, h = x.shape
    return x.view(s, b, n, h // n).permute(1, 2, 0, 3)


def _from_bnsd(x: torch.Tensor, layout: str) -> torch.Tensor:
    if layout == "BNSD":
        return x.contiguous()
    if layout == "BSND":
        return x.transpose(1, 2).contiguous()
    b, n, s, d = x.shape
    if layout == "BSH":
        return x.transpose(1, 2).reshape(b, s, n * d)
    return x.permute(2, 0, 1, 3).reshape(s, b, n * d)


def _dims(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, head_num: int, layout: str):
    """Return (Nq, Nkv, D, Dv) after checking the shapes for ``layout``."""
    expected_dim = {"BSH": 3, "SBH": 3, "BSND": 4, "BNSD": 4, "TND": 3}[layout]
    for name, t in (("query", query), ("key", key), ("value", value)):
        if t.dim() != expected_dim:
            raise ValueError(f"npu_fusion_attention: {name} must be {expected_dim}-D for input_layout "
                             f"'{layout}'; got shape {tuple(t.shape)}")
    if layout in ("BSH", "SBH"):
        hq, hk, hv = query.shape[-1], key.shape[-1], value.shape[-1]
        if hq % head_num:
            raise ValueError(f"npu_fusion_attention: query hidden size {hq} is not divisible by head_num {head_num}")
        d = hq // head_num
        if hk % d:
            raise ValueError(f"npu_fusion_attention: key hidden size {hk} is not a multiple of D={d}")
        nkv = hk // d
        if nkv == 0 or hv % nkv:
            raise ValueError(f"npu_fusion_attention: value hidden size {hv} is not a multiple of Nkv={nkv}")
        return head_num, nkv, d, hv // nkv
    n_axis = {"BNSD": 1, "BSND": 2, "TND": 1}[layout]
    nq = query.shape[n_axis]
    if nq != head_num:
        raise ValueError(f"npu_fusion_attention: head_num={head_num} but query has {nq} heads "
                         f"(input_layout '{layout}', shape {tuple(query.shape)})")
    nkv = key.shape[n_axis]
    if value.shape[n_axis] != nkv:
        raise ValueError("npu_fusion_attention: key and value must have the same number of heads")
    return nq, nkv, query.shape[-1], value.shape[-1]


def _attend(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor | None,
            pse: torch.Tensor | None, scale: float, keep: torch.Tensor | None, keep_prob: float,
            sink: torch.Tensor | None, round_to: torch.dtype | None = None):
    """Core: q (B,N,Sq,D), k/v (B,N,Skv,·) already head-expanded, in the compute dtype."""
    s = torch.matmul(q, k.transpose(-1, -2))
    if pse is not None:
        s = s + pse
    s = s * scale
    if mask is not None:
        s = s.masked_fill(mask, float("-inf"))
    m = s.detach().amax(dim=-1, keepdim=True)
    if sink is not None:
        sink_b = sink.view(1, -1, 1, 1).to(s.dtype)
        m = torch.maximum(m, sink_b.detach())
    m_safe = torch.where(torch.isfinite(m), m, torch.zeros_like(m))
    e = torch.exp(s - m_safe)
    denom = e.sum(dim=-1, keepdim=True)
    if sink is not None:
        denom = denom + torch.exp(sink_b - m_safe)
    p = e / torch.where(denom > 0, denom, torch.ones_like(denom))
    if round_to is not None:  # P enters the second matmul in the input dtype (forward only)
        p = p + (p.detach().to(round_to).to(p.dtype) - p.detach())
    if keep is not None:
        p = p * keep.to(p.dtype) / keep_prob
    out = torch.matmul(p, v)
    return out, m.detach(), denom.detach()


def _p_dtype(query: torch.Tensor) -> torch.dtype | None:
    return query.dtype if query.dtype in (torch.float16, torch.bfloat16) else None


def _seq_bounds(cum: Sequence[int], total: int, name: str) -> list[tuple[int, int]]:
    """Cumulative lengths without a leading 0 → [(start, end)] (§c.1)."""
    values = [int(c) for c in cum]
    bounds: list[tuple[int, int]] = []
    prev = 0
    for idx, c in enumerate(values):
        if c == 0 and prev > 0 and all(x == 0 for x in values[idx:]):
            break  # trailing zeros skip trailing sequences
        if c < prev:
            raise ValueError(f"npu_fusion_attention: {name} must be non-decreasing cumulative lengths "
                             f"without a leading 0 (e.g. [2, 4, 6]); got {values}")
        bounds.append((prev, c))
        prev = c
    if prev > total:
        raise ValueError(f"npu_fusion_attention: {name} ends at {prev} but the tensor has only {total} tokens")
    return bounds


def _as_int_list(value, name: str) -> list[int]:
    if value is None:
        raise ValueError(f"npu_fusion_attention: input_layout 'TND' requires {name} (cumulative lengths "
                         "without a leading 0, ascend-facts §c.1)")
    if isinstance(value, torch.Tensor):
        value = value.tolist()
    return [int(v) for v in value]


def _dropout_keep(shape, keep_prob: float, generator: torch.Generator | None, device) -> torch.Tensor | None:
    if keep_prob >= 1.0:
        return None
    return torch.rand(shape, generator=generator, device=device) < keep_prob


def no_autocast(fn):
    """Run a custom op with CPU autocast disabled (ascend-facts §c: custom ops).

    The device op is on no autocast list and computes in its input dtype; CPU autocast would
    otherwise turn the inner fp32 matmuls into bf16."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        with torch.autocast(device_type="cpu", enabled=False):
            return fn(*args, **kwargs)

    return wrapper


# --------------------------------------------------------------------------------- public op
@no_autocast
def npu_fusion_attention(query, key, value, head_num, input_layout, pse=None, padding_mask=None,
                         atten_mask=None, scale=1.0, keep_prob=1.0, pre_tockens=2147483647,
                         next_tockens=2147483647, inner_precise=0, prefix=None, actual_seq_qlen=None,
                         actual_seq_kvlen=None, sparse_mode=0, gen_mask_parallel=True, sync=False,
                         softmax_layout="", sink=None, dropout_mask=None, seed=0, offset=0):
    """Emulated ``torch_npu.npu_fusion_attention`` (ascend-facts §c.1; alignment §c.5).

    Signature and defaults as in the torch-npu 2.14 yaml schema; semantics, limits and precision
    are listed in this module's docstring. Returns the 7-tuple
    ``(attention_out, softmax_max, softmax_sum, softmax_out, seed, offset, numels)``.
    """
    layout = input_layout
    if layout not in LAYOUTS:
        raise ValueError(f"npu_fusion_attention: input_layout must be one of {LAYOUTS}; got {input_layout!r}")
    if not isinstance(head_num, int) or isinstance(head_num, bool) or head_num <= 0:
        raise ValueError(f"npu_fusion_attention: head_num must be a positive int; got {head_num!r}")
    if padding_mask is not None:
        raise NotImplementedError("npu_fusion_attention: padding_mask is not supported (keep None, ascend-facts §c.1)")
    if query.dtype != key.dtype or query.dtype != value.dtype:
        raise TypeError(f"npu_fusion_attention: query/key/value must share one dtype; got "
                        f"{query.dtype}, {key.dtype}, {value.dtype}")
    if query.dtype not in (torch.float16, torch.bfloat16, torch.float32, torch.float64):
        raise TypeError(f"npu_fusion_attention: dtype must be fp16, bf16 or fp32; got {query.dtype}")
    if not (0.0 < float(keep_prob) <= 1.0):
        raise ValueError(f"npu_fusion_attention: keep_prob must be in (0, 1]; got {keep_prob}")
    if sparse_mode not in range(9):
        raise ValueError(f"npu_fusion_attention: sparse_mode must be 0..8; got {sparse_mode}")
    if sparse_mode in (7, 8) and layout != "TND":
        raise ValueError(f"npu_fusion_attention: sparse_mode={sparse_mode} is only supported for input_layout 'TND'")
    if sparse_mode == 5 and layout == "TND":
        raise ValueError("npu_fusion_attention: sparse_mode=5 is not supported for varlen (TND)")
    if sparse_mode in (7, 8) and pse is not None:
        raise ValueError(f"npu_fusion_attention: sparse_mode={sparse_mode} does not support pse")

    nq, nkv, d, dv = _dims(query, key, value, head_num, layout)
    if nkv == 0 or nq % nkv:
        raise ValueError(f"npu_fusion_attention: Nq={nq} must be a multiple of Nkv={nkv} (GQA/MQA)")
    dk = key.shape[-1] if layout not in ("BSH", "SBH") else key.shape[-1] // nkv
    if dk != d:
        raise ValueError(f"npu_fusion_attention: query and key head dims differ ({d} vs {dk})")
    group = nq // nkv
    compute = torch.float64 if query.dtype == torch.float64 else torch.float32
    scale = float(scale)
    keep_prob = float(keep_prob)
    if keep_prob < 1.0 and dropout_mask is None:  # reported to the validation's dropout census (neutralised: 1)
        keep_prob = 1.0 - _dropout.fused("npu_fusion_attention(keep_prob)", 1.0 - keep_prob)
    pre, nxt = int(pre_tockens), int(next_tockens)

    mask_in = None
    if atten_mask is not None:
        mask_in = _check_mask_dtype(atten_mask)
    if sparse_mode in _COMPRESSED_MODES or sparse_mode == 6:
        _check_compressed_mask(mask_in, sparse_mode)
    if sparse_mode in (1, 5):
        if mask_in is None:
            raise ValueError(f"npu_fusion_attention: sparse_mode={sparse_mode} requires a full atten_mask")
        if sparse_mode == 5 and mask_in.dim() != 4:
            raise ValueError("npu_fusion_attention: sparse_mode=5 requires a BNSS or B1SS atten_mask")

    generator = None
    seed_out, offset_out = int(seed), int(offset)
    if keep_prob < 1.0 and dropout_mask is None:
        if seed_out == 0:
            seed_out = int(torch.randint(1, 2 ** 31 - 1, (1,)).item())
        generator = torch.Generator(device="cpu")
        generator.manual_seed((seed_out * 1000003 + offset_out) % (2 ** 63))

    def expand_kv(t: torch.Tensor) -> torch.Tensor:
        return t if group == 1 else t.repeat_interleave(group, dim=1)

    if layout != "TND":
        q4 = _to_bnsd(query, layout, nq).to(compute)
        k4 = expand_kv(_to_bnsd(key, layout, nkv).to(compute))
        v4 = expand_kv(_to_bnsd(value, layout, nkv).to(compute))
        b, _, sq, _ = q4.shape
        skv = k4.shape[2]
        dev = q4.device
        if sparse_mode == 0:
            mask = None if mask_in is None else _or(_user_mask_4d(mask_in, b, nq, sq, skv),
                                                   _band_top_left(sq, skv, pre, nxt, dev))
        elif sparse_mode in (1, 5):
            assert mask_in is not None  # checked above: modes 1 and 5 raise without a full mask
            mask = _user_mask_4d(mask_in, b, nq, sq, skv)
        elif sparse_mode == 2:
            mask = _left_up_causal(sq, skv, dev)
        elif sparse_mode == 3:
            mask = _right_down_causal(sq, skv, dev)
        elif sparse_mode == 4:
            mask = _band_bottom_right(sq, skv, pre, nxt, dev)
        else:  # 6: prefix compressed
            if prefix is None or len(prefix) != b:
                raise ValueError("npu_fusion_attention: sparse_mode=6 requires prefix with one entry per batch")
            _, j = _ij(sq, skv, dev)
            pfx = torch.as_tensor([int(p) for p in prefix], device=dev).view(b, 1, 1, 1)
            mask = _right_down_causal(sq, skv, dev).view(1, 1, sq, skv) & (j.view(1, 1, 1, skv) >= pfx)
        pse_c = None
        if pse is not None:
            if pse.dim() != 4:
                raise ValueError(f"npu_fusion_attention: pse must be BNSS, BN1Skv or 1NSS; got {tuple(pse.shape)}")
            pse_c = pse.to(compute)
        keep = None
        numels = 0
        if keep_prob < 1.0:
            shape = (b, nq, sq, skv)
            numels = b * nq * sq * skv
            if dropout_mask is not None:
                if tuple(dropout_mask.shape) != shape:
                    raise NotImplementedError("npu_fusion_attention emulation: dropout_mask must be an unpacked "
                                              f"bool/uint8 tensor of shape {shape}")
                keep = dropout_mask.bool()
            else:
                keep = _dropout_keep(shape, keep_prob, generator, dev)
        out, m, den = _attend(q4, k4, v4, mask, pse_c, scale, keep, keep_prob, sink, _p_dtype(query))
        out = _from_bnsd(out.to(query.dtype), layout)
        softmax_max = m.float().expand(b, nq, sq, 8).contiguous()
        softmax_sum = den.float().expand(b, nq, sq, 8).contiguous()
        return (out, softmax_max, softmax_sum, torch.empty(0, dtype=query.dtype, device=query.device),
                seed_out, offset_out, numels)

    # ---------------------------------------------------------------- TND varlen
    if pse is not None:
        raise NotImplementedError("npu_fusion_attention emulation: pse with input_layout 'TND' is not emulated")
    if sparse_mode == 6:
        raise NotImplementedError(
            "npu_fusion_attention emulation: sparse_mode=6 with input_layout 'TND' is not emulated")
    qlen = _as_int_list(actual_seq_qlen, "actual_seq_qlen")
    kvlen = _as_int_list(actual_seq_kvlen, "actual_seq_kvlen")
    if len(qlen) != len(kvlen):
        raise ValueError(f"npu_fusion_attention: actual_seq_qlen and actual_seq_kvlen must have the same "
                         f"length; got {len(qlen)} and {len(kvlen)}")
    tq, tkv = query.shape[0], key.shape[0]
    qb = _seq_bounds(qlen, tq, "actual_seq_qlen")
    kb = _seq_bounds(kvlen, tkv, "actual_seq_kvlen")
    nb = min(len(qb), len(kb))
    qb, kb = qb[:nb], kb[:nb]
    non_empty = [i for i in range(nb) if qb[i][1] > qb[i][0] and kb[i][1] > kb[i][0]]
    if mask_in is not None and sparse_mode in (0, 1) and mask_in.dim() != 2:
        raise ValueError("npu_fusion_attention: varlen (TND) atten_mask must be SS (maxSq x maxSkv)")
    dev = query.device
    outs: list[torch.Tensor] = []
    maxes: list[torch.Tensor] = []
    sums: list[torch.Tensor] = []
    numels = 0
    covered = 0
    for idx in range(nb):
        (q0, q1), (k0, k1) = qb[idx], kb[idx]
        sq, skv = q1 - q0, k1 - k0
        if sq == 0:
            continue
        if skv == 0:
            outs.append(torch.zeros(sq, nq, dv, dtype=query.dtype, device=dev))
            maxes.append(torch.full((sq, nq, 8), float("-inf"), device=dev))
            sums.append(torch.zeros(sq, nq, 8, device=dev))
            covered = q1
            continue
        q4 = query[q0:q1].to(compute).permute(1, 0, 2).unsqueeze(0)
        k4 = expand_kv(key[k0:k1].to(compute).permute(1, 0, 2).unsqueeze(0))
        v4 = expand_kv(value[k0:k1].to(compute).permute(1, 0, 2).unsqueeze(0))
        if sparse_mode in (0, 1):
            if mask_in is None:
                mask = None
            else:
                if mask_in.shape[0] < sq or mask_in.shape[1] < skv:
                    raise ValueError(f"npu_fusion_attention: SS atten_mask {tuple(mask_in.shape)} is smaller than "
                                     f"sequence {idx} ({sq} x {skv})")
                mask = mask_in[:sq, :skv]
                if sparse_mode == 0:
                    mask = _or(mask, _band_top_left(sq, skv, pre, nxt, dev))
        elif sparse_mode == 2:
            mask = _left_up_causal(sq, skv, dev)
        elif sparse_mode == 3:
            mask = _right_down_causal(sq, skv, dev)
        elif sparse_mode == 4:
            mask = _band_bottom_right(sq, skv, pre, nxt, dev)
        elif sparse_mode == 7:
            mask = (_band_bottom_right(sq, skv, pre, nxt, dev) if idx == non_empty[-1]
                    else _right_down_causal(sq, skv, dev))
        else:  # 8
            mask = (_band_bottom_right(sq, skv, pre, nxt, dev) if idx == non_empty[0]
                    else _left_up_causal(sq, skv, dev))
        keep = None
        if keep_prob < 1.0:
            numels += nq * sq * skv
            keep = _dropout_keep((1, nq, sq, skv), keep_prob, generator, dev)
        out, m, den = _attend(q4, k4, v4, mask, None, scale, keep, keep_prob, sink, _p_dtype(query))
        outs.append(out[0].permute(1, 0, 2).to(query.dtype))
        maxes.append(m[0, :, :, 0].t().float().unsqueeze(-1).expand(sq, nq, 8))
        sums.append(den[0, :, :, 0].t().float().unsqueeze(-1).expand(sq, nq, 8))
        covered = q1
    if covered < tq:
        rest = tq - covered
        outs.append(torch.zeros(rest, nq, dv, dtype=query.dtype, device=dev))
        maxes.append(torch.full((rest, nq, 8), float("-inf"), device=dev))
        sums.append(torch.zeros(rest, nq, 8, device=dev))
    out = torch.cat(outs, 0) if outs else torch.zeros(tq, nq, dv, dtype=query.dtype, device=dev)
    softmax_max = torch.cat(maxes, 0).contiguous() if maxes else torch.zeros(0, nq, 8, device=dev)
    softmax_sum = torch.cat(sums, 0).contiguous() if sums else torch.zeros(0, nq, 8, device=dev)
    return (out, softmax_max, softmax_sum, torch.empty(0, dtype=query.dtype, device=dev),
            seed_out, offset_out, numels)
