"""The attention masks of the emulated ``npu_fusion_attention``: the compressed masks the real op requires
for sparse modes 2, 3, 4, 6, 7, 8, the top-left and bottom-right bands, the causal masks, and a user
mask broadcast to B×N×Sq×Skv (True = masked out; the semantics are in :mod:`.attention`)."""

from __future__ import annotations

import functools

import torch

COMPRESSED_SIZE = 2048


# read only (compared): a model that builds its mask every step is checked against one copy, not a new 2048²
@functools.lru_cache(maxsize=4)
def _expected_compressed(rows: int, cols: int, device: torch.device) -> torch.Tensor:
    if rows == COMPRESSED_SIZE:
        return torch.triu(torch.ones(COMPRESSED_SIZE, COMPRESSED_SIZE, dtype=torch.bool, device=device), 1)
    top = torch.triu(torch.ones(COMPRESSED_SIZE, COMPRESSED_SIZE, dtype=torch.bool, device=device), 1)
    bottom = torch.zeros(1024, COMPRESSED_SIZE, dtype=torch.bool, device=device)
    bottom[:, COMPRESSED_SIZE // 2:] = True
    return torch.cat([top, bottom], 0)


def _check_compressed_mask(atten_mask: torch.Tensor | None, sparse_mode: int) -> None:
    """Modes 2/3/4/7/8 need the 2048² compressed ``triu`` mask, mode 6 the 3072×2048 one (§c.1)."""
    rows = 3072 if sparse_mode == 6 else COMPRESSED_SIZE
    how = ("torch.triu(torch.ones(2048, 2048), diagonal=1).bool()" if rows == COMPRESSED_SIZE
           else "the 3072x2048 prefix-compressed mask (2048² triu on top of 1024 rows [0…0 | 1…1])")
    if atten_mask is None:
        raise ValueError(
            f"npu_fusion_attention: sparse_mode={sparse_mode} requires the compressed atten_mask "
            f"{how} (ascend-facts §c.1); got atten_mask=None")
    if tuple(atten_mask.shape) != (rows, COMPRESSED_SIZE):
        raise ValueError(
            f"npu_fusion_attention: sparse_mode={sparse_mode} requires the compressed atten_mask of shape "
            f"({rows}, {COMPRESSED_SIZE}) built as {how}; got shape {tuple(atten_mask.shape)}. An Sq x Skv "
            "mask is only valid with sparse_mode 0 or 1 (ascend-facts §c.1)")
    # the content check is cached on the tensor itself (an in-place edit bumps ``_version``);
    # a cache keyed by data_ptr would wrongly accept a new tensor reusing a freed mask's memory
    if getattr(atten_mask, "_npu_emulation_checked_version", None) == atten_mask._version:
        return
    if not torch.equal(atten_mask.detach().bool(), _expected_compressed(rows, COMPRESSED_SIZE, atten_mask.device)):
        raise ValueError(
            f"npu_fusion_attention: sparse_mode={sparse_mode} expects atten_mask == {how}; the given "
            f"({rows}, {COMPRESSED_SIZE}) mask has different contents (the device would read it as that "
            "pattern anyway)")
    try:
        atten_mask._npu_emulation_checked_version = atten_mask._version  # type: ignore[attr-defined]
    except (AttributeError, RuntimeError):  # pragma: no cover - exotic tensor subclasses
        pass


def _check_mask_dtype(atten_mask: torch.Tensor) -> torch.Tensor:
    if atten_mask.dtype not in (torch.bool, torch.uint8):
        raise TypeError(
            f"npu_fusion_attention: atten_mask must be bool or uint8 with True/1 = masked out "
            f"(ascend-facts §c.1); got {atten_mask.dtype}. An additive float mask (SDPA style) must "
            "be converted, e.g. mask = float_mask < 0")
    return atten_mask.bool() if atten_mask.dtype != torch.bool else atten_mask


def _ij(sq: int, skv: int, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    i = torch.arange(sq, device=device).unsqueeze(1)
    j = torch.arange(skv, device=device).unsqueeze(0)
    return i, j


def _band_top_left(sq: int, skv: int, pre: int, nxt: int, device: torch.device) -> torch.Tensor | None:
    """Mode 0 band: masked iff ``j - i > next`` or ``i - j > pre`` (None if nothing is masked)."""
    if pre >= sq and nxt >= skv:
        return None
    i, j = _ij(sq, skv, device)
    return ((j - i) > nxt) | ((i - j) > pre)


def _left_up_causal(sq: int, skv: int, device: torch.device) -> torch.Tensor:
    """Mode 2: ``triu(ones(Sq, Skv), 1)`` — query i sees keys ``j <= i`` (top-left aligned)."""
    i, j = _ij(sq, skv, device)
    return j > i


def _right_down_causal(sq: int, skv: int, device: torch.device) -> torch.Tensor:
    """Mode 3: ``triu(ones(Sq, Skv), Skv - Sq + 1)`` — bottom-right aligned causal mask."""
    i, j = _ij(sq, skv, device)
    return j > i + (skv - sq)


def _band_bottom_right(sq: int, skv: int, pre: int, nxt: int, device: torch.device) -> torch.Tensor:
    """Mode 4 (and the band part of 7/8): origin bottom-right, keep ``d - pre <= j <= d + next``
    with ``d = i + Skv - Sq``."""
    i, j = _ij(sq, skv, device)
    d = i + (skv - sq)
    return (j > d + nxt) | (j < d - pre)


def _or(a: torch.Tensor | None, b: torch.Tensor | None) -> torch.Tensor | None:
    if a is None:
        return b
    if b is None:
        return a
    return a | b


def _user_mask_4d(atten_mask: torch.Tensor, b: int, n: int, sq: int, skv: int) -> torch.Tensor:
    """Validate a full mask (BNSS, B1SS, 11SS or SS) and return it broadcastable to (B, N, Sq, Skv)."""
    shape = tuple(atten_mask.shape)
    if atten_mask.dim() == 2:
        if shape != (sq, skv):
            raise ValueError(f"npu_fusion_attention: SS atten_mask must have shape ({sq}, {skv}); got {shape}")
        return atten_mask.view(1, 1, sq, skv)
    if atten_mask.dim() == 4:
        if shape[2:] != (sq, skv) or shape[0] not in (1, b) or shape[1] not in (1, n):
            raise ValueError(
                "npu_fusion_attention: atten_mask must be BNSS/B1SS/11SS/SS = "
                f"({b}|1, {n}|1, {sq}, {skv}); got {shape}")
        return atten_mask
    raise ValueError(f"npu_fusion_attention: atten_mask must be 2-D (SS) or 4-D (BNSS/B1SS/11SS); got {shape}")
