"""Which query positions see which keys: the attention pattern a call allows, whatever encodes it.

A bool keep-mask, an additive ``-inf`` mask, ``is_causal=True``, flash-attn's ``causal`` /
``window_size``, xformers' bias classes and npu_fusion_attention's ``atten_mask`` (True = masked
out) with its ``sparse_mode`` all reduce to one bool array ``[B, Sq, Skv]`` (True = query i sees
key j; heads folded when they all agree). :func:`encode` packs it into a short string for the
semantic record; :func:`describe_difference` says where two patterns part. Torch is imported by
the extractors only (the child side); the parent only decodes strings.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from torch import Tensor

from .metrics import MASKED_BELOW  # an additive mask value at or below this masks the key (-inf, finfo.min)

MAX_BITS = 1 << 16  # larger patterns are kept as a digest: compared, not located


def _ij(sq: int, skv: int, like: Tensor) -> tuple[Tensor, Tensor]:
    import torch

    i = torch.arange(sq, device=like.device).unsqueeze(1)
    j = torch.arange(skv, device=like.device).unsqueeze(0)
    return i, j


def causal(sq: int, skv: int, like: Tensor, *, bottom_right: bool) -> Tensor:
    """Query i sees keys j <= i (top-left) or j <= i + Skv - Sq (bottom-right)."""
    i, j = _ij(sq, skv, like)
    return j <= i + ((skv - sq) if bottom_right else 0)


def window(sq: int, skv: int, like: Tensor, left: int, right: int) -> Tensor:
    """flash-attn's window_size, bottom-right aligned; -1 is unbounded."""
    i, j = _ij(sq, skv, like)
    d = i + (skv - sq)
    keep = j >= 0
    if left >= 0:
        keep = keep & (j >= d - left)
    if right >= 0:
        keep = keep & (j <= d + right)
    return keep


def from_mask(mask: Tensor, *, true_means_keep: bool) -> Tensor:
    """A bool mask (polarity given) or an additive float mask (0 keep, large negative masked)."""
    if mask.dtype.is_floating_point:
        return mask.float() > MASKED_BELOW
    m = mask.bool()
    return m if true_means_keep else ~m


def fold(keep: Tensor, b: int, n: int, sq: int, skv: int) -> Tensor:
    """Broadcast to ``[B, N, Sq, Skv]``; fold the heads, then the batch, where they all allow the same keys."""
    while keep.dim() < 4:
        keep = keep.unsqueeze(0)
    keep = keep.expand(b, n, sq, skv)
    keep = keep[:, 0] if bool((keep == keep[:, :1]).all()) else keep.reshape(b * n, sq, skv)
    return keep[:1] if bool((keep == keep[:1]).all()) else keep


def encode(keep: Tensor) -> str:
    """``"2x8x8:<hex bits>"`` (row-major, True = sees) or ``"2x8x8:sha256:<digest>"`` when large."""
    import numpy as np

    shape = "x".join(str(s) for s in keep.shape)
    bits = np.packbits(keep.detach().to("cpu").numpy().astype(bool).reshape(-1)).tobytes()
    if keep.numel() > MAX_BITS:
        return f"{shape}:sha256:{hashlib.sha256(bits).hexdigest()}"
    return f"{shape}:{bits.hex()}"


def _decode(code: str) -> tuple[tuple[int, ...], list[bool] | None]:
    shape_text, _, data = code.partition(":")
    shape = tuple(int(s) for s in shape_text.split("x"))
    if data.startswith("sha256:"):
        return shape, None
    size = 1
    for s in shape:
        size *= s
    raw = bytes.fromhex(data)
    bits = [bool(raw[k // 8] >> (7 - k % 8) & 1) for k in range(size)]
    return shape, bits


def keep_array(code: str) -> Tensor | None:
    """The pattern back as a bool ``[B, Sq, Skv]`` tensor (True = sees); None for a digest (too large)."""
    import torch

    shape, bits = _decode(code)
    return None if bits is None else torch.tensor(bits, dtype=torch.bool).reshape(shape)


def _who(allowed: bool) -> str:
    return "migrated only" if allowed else "original only"


def describe_difference(original: str, migrated: str) -> str:
    """Where the migrated pattern differs: ``query 0 sees key 1 in the migrated only (5 positions)``."""
    shape_o, bits_o = _decode(original)
    shape_m, bits_m = _decode(migrated)
    if shape_o != shape_m:
        return f"patterns of different shapes: {shape_m} (migrated) vs {shape_o} (original) [batch, query, key]"
    if bits_o is None or bits_m is None:
        return f"different patterns over {shape_m} [batch, query, key] (too large to locate)"
    _, sq, skv = shape_m
    diffs = [k for k, (a, b) in enumerate(zip(bits_o, bits_m)) if a != b]
    k = diffs[0]
    batch, rest = divmod(k, sq * skv)
    i, j = divmod(rest, skv)
    where = f"batch {batch} " if shape_m[0] > 1 else ""
    return (f"{where}query {i} sees key {j} in the {_who(bits_m[k])} "
            f"({len(diffs)} of {len(bits_m)} query-key pairs differ)")


def safe(build: Callable[[], Tensor]) -> str | None:
    """The encoded pattern, or None where it cannot be worked out (varlen, an odd mask shape)."""
    try:
        return encode(build())
    except Exception:  # noqa: BLE001 - a pattern we cannot evaluate is not compared
        return None
