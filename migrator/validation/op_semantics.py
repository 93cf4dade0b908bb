"""The effective semantic arguments of known op pairs, and their side-by-side diff (no torch import).

Each extractor takes the call's ``(args, kwargs)`` (tensors only read for shapes/dtypes) and returns
``{argument: (value, how it was set)}`` in one vocabulary for every library, so a CUDA op and its
Ascend replacement compare key by key (ascend-facts §c.1, §c.5):

* attention (flash_attn_func / flash_attn_varlen_func, xformers memory_efficient_attention, torch
  SDPA ↔ ``npu_fusion_attention``): ``scale``, ``causal alignment``, ``mask polarity``, ``layout``,
  ``keep_prob``;
* norms (apex Fused*Norm, ``F.layer_norm``, ``F.rms_norm`` ↔ ``npu_rms_norm``): ``eps``, ``affine``;
* optimizers (apex FusedAdam, torch Adam/AdamW ↔ torch_npu fused ones): ``lr``, ``betas``, ``eps``,
  ``weight_decay``, ``decoupled weight decay (adam_w_mode)``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

Semantic = dict[str, tuple[Any, str]]
KIND = {"flash_attn_func": "attention", "flash_attn_varlen_func": "attention",
        "memory_efficient_attention": "attention", "scaled_dot_product_attention": "attention",
        "npu_fusion_attention": "attention", "layer_norm": "layer_norm", "rms_norm": "rms_norm",
        "npu_rms_norm": "rms_norm", "FusedLayerNorm": "layer_norm", "FusedRMSNorm": "rms_norm",
        "MixedFusedLayerNorm": "layer_norm", "MixedFusedRMSNorm": "rms_norm"}


def _arg(args, kwargs, index: int, name: str, default: Any = None) -> tuple[Any, bool]:
    """(value, given explicitly)."""
    if name in kwargs:
        return kwargs[name], True
    if len(args) > index:
        return args[index], True
    return default, False


def _shape(t) -> tuple[int, ...]:
    return tuple(getattr(t, "shape", ()) or ())


def _rsqrt_default(lib: str, d: int) -> tuple[float, str]:
    return 1.0 / math.sqrt(d), f"{lib} default 1/√{d}"


def _scale(value, given: bool, lib: str, d: int) -> tuple[Any, str]:
    if value is None:
        return _rsqrt_default(lib, d)
    return float(value), "given" if given else f"{lib} default"


def flash_attn(name: str, args, kwargs) -> Semantic:
    q = args[0]
    varlen = name == "flash_attn_varlen_func"
    base = 7 if varlen else 3  # positional index of dropout_p
    dropout, _ = _arg(args, kwargs, base, "dropout_p", 0.0)
    scale, given = _arg(args, kwargs, base + 1, "softmax_scale", None)
    causal, _ = _arg(args, kwargs, base + 2, "causal", False)
    window, _ = _arg(args, kwargs, base + 3, "window_size", (-1, -1))
    out: Semantic = {
        "scale": _scale(scale, given, "flash_attn", _shape(q)[-1]),
        "causal alignment": ("bottom-right" if causal else "none",
                             "flash_attn >= 2.1 causal=True" if causal else "causal=False"),
        "mask polarity": ("no mask", "flash_attn takes none"),
        "layout": ("TND" if varlen else "BSND", "flash_attn (total, heads, dim)" if varlen else "flash_attn (B, S, N, D)"),
        "keep_prob": (1.0 - float(dropout or 0.0), "1 - dropout_p"),
    }
    if tuple(window or (-1, -1)) != (-1, -1):
        out["band"] = (f"window {tuple(window)}", "window_size")
    return out


def xformers(name: str, args, kwargs) -> Semantic:
    q = args[0]
    bias, _ = _arg(args, kwargs, 3, "attn_bias", None)
    p, _ = _arg(args, kwargs, 4, "p", 0.0)
    scale, given = _arg(args, kwargs, 5, "scale", None)
    kind = type(bias).__name__ if bias is not None else None
    how = f"{kind} (structured, no mask tensor)" if kind else "no attn_bias"
    if kind is None:
        causal, polarity = "none", "no mask"
    elif "FromBottomRight" in kind:
        causal, polarity = "bottom-right", "no mask"
    elif "LowerTriangular" in kind:
        causal, polarity = "top-left", "no mask"
    else:
        causal, polarity, how = "none", "additive bias (0 keep, -inf masked)", "attn_bias tensor"
    return {"scale": _scale(scale, given, "xformers", _shape(q)[-1]),
            "causal alignment": (causal, kind or "no attn_bias"), "mask polarity": (polarity, how),
            "layout": ("BSND", "xformers (B, M, H, K)"), "keep_prob": (1.0 - float(p or 0.0), "1 - p")}


def sdpa(name: str, args, kwargs) -> Semantic:
    q = args[0]
    mask, _ = _arg(args, kwargs, 3, "attn_mask", None)
    dropout, _ = _arg(args, kwargs, 4, "dropout_p", 0.0)
    causal, _ = _arg(args, kwargs, 5, "is_causal", False)
    scale, given = _arg(args, kwargs, 6, "scale", None)
    if mask is None:
        polarity = "no mask"
    elif str(getattr(mask, "dtype", "")) == "torch.bool":
        polarity = "bool, True = attend"
    else:
        polarity = "additive float (0 keep, -inf masked)"
    return {"scale": _scale(scale, given, "SDPA", _shape(q)[-1]),
            "causal alignment": ("top-left" if causal else ("given mask" if mask is not None else "none"),
                                 "SDPA is_causal=True" if causal else "is_causal=False"),
            "mask polarity": (polarity, "attn_mask"), "layout": ("BNSD", "SDPA (B, N, S, D)"),
            "keep_prob": (1.0 - float(dropout or 0.0), "1 - dropout_p")}


_SPARSE = {0: "given mask", 1: "given mask", 2: "top-left", 3: "bottom-right", 4: "band, bottom-right origin",
           5: "prefix", 6: "prefix", 7: "bottom-right (varlen split)", 8: "top-left (varlen split)"}


def npu_fusion_attention(name: str, args, kwargs) -> Semantic:
    layout, _ = _arg(args, kwargs, 4, "input_layout", "BSH")
    mask, _ = _arg(args, kwargs, 7, "atten_mask", None)
    scale, given = _arg(args, kwargs, 8, "scale", 1.0)
    keep, _ = _arg(args, kwargs, 9, "keep_prob", 1.0)
    mode, _ = _arg(args, kwargs, 16, "sparse_mode", 0)
    mode = int(mode or 0)
    if mask is None:
        causal = "none" if mode in (0, 1) else _SPARSE.get(mode, str(mode))
        polarity = "no mask"
    elif mode in (2, 3, 4, 6, 7, 8):  # the compressed mask only encodes the mode's pattern
        causal, polarity = _SPARSE.get(mode, str(mode)), "no mask"
    else:
        causal = _SPARSE.get(mode, f"sparse_mode {mode}")
        polarity = f"{str(getattr(mask, 'dtype', '')).removeprefix('torch.')} {list(_shape(mask))}, True = masked out"
    return {"scale": (float(scale), "given" if given else "npu default"),
            "causal alignment": (causal, f"sparse_mode {mode}"), "mask polarity": (polarity, "atten_mask"),
            "layout": (str(layout), "input_layout"), "keep_prob": (float(keep), "keep_prob")}


def layer_norm(name: str, args, kwargs) -> Semantic:
    weight, _ = _arg(args, kwargs, 2, "weight", None)
    eps, given = _arg(args, kwargs, 4 if name == "layer_norm" else 3, "eps", 1e-5 if name == "layer_norm" else None)
    return {"eps": (eps, "given" if given else f"F.{name} default"), "affine": (weight is not None, "weight passed")}


def npu_rms_norm(name: str, args, kwargs) -> Semantic:
    eps, given = _arg(args, kwargs, 2, "epsilon", 1e-6)
    return {"eps": (float(eps), "given" if given else "npu default"), "affine": (True, "gamma is mandatory")}


def norm_module(module) -> Semantic:
    """apex Fused*Norm (or any norm module with ``eps``): from its attributes."""
    return {"eps": (getattr(module, "eps", None), f"{type(module).__name__}(eps=...)"),
            "affine": (bool(getattr(module, "elementwise_affine", True)), "elementwise_affine")}


EXTRACTORS = {"flash_attn_func": flash_attn, "flash_attn_varlen_func": flash_attn,
              "memory_efficient_attention": xformers, "scaled_dot_product_attention": sdpa,
              "npu_fusion_attention": npu_fusion_attention, "layer_norm": layer_norm, "rms_norm": layer_norm,
              "npu_rms_norm": npu_rms_norm}


def optimizer(opt) -> Semantic:
    """Hyper-parameters of the first param group, in one vocabulary (apex ``adam_w_mode``, torch
    ``AdamW`` = decoupled, ``Adam`` = L2 unless ``decoupled_weight_decay``)."""
    group = opt.param_groups[0] if getattr(opt, "param_groups", None) else {}
    cls = type(opt).__name__
    out: Semantic = {}
    for key in ("lr", "betas", "eps", "weight_decay"):
        if key in group:
            value = group[key]
            value = tuple(float(b) for b in value) if isinstance(value, (tuple, list)) else float(value)
            out[key] = (value, cls)
    if hasattr(opt, "adam_w_mode"):
        out["decoupled weight decay (adam_w_mode)"] = (bool(opt.adam_w_mode), f"{cls}.adam_w_mode")
    elif "Adam" in cls:
        decoupled = "AdamW" in cls or bool(group.get("decoupled_weight_decay", False))
        out["decoupled weight decay (adam_w_mode)"] = (decoupled, cls)
    return out


def _fmt(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:.4g}"
    if isinstance(v, tuple):
        return "(" + ", ".join(_fmt(x) for x in v) + ")"
    return str(v)


def diff(original: dict[str, Any], migrated: dict[str, Any], names: tuple[str, str]) -> list[str]:
    """``["scale: 1 (npu default) vs 0.125 (flash_attn default 1/√64)", ...]`` for the keys that
    differ: migrated first, as the rest of the report. Values are ``[value, how]`` pairs (JSON)."""
    lines = []
    for key in migrated:
        if key not in original:
            continue
        (vm, hm), (vo, ho) = migrated[key], original[key]
        same = (abs(vm - vo) <= 1e-9 * max(abs(vo), 1.0) if isinstance(vm, float) and isinstance(vo, float)
                else _fmt(vm) == _fmt(vo))
        if not same:
            lines.append(f"{key}: {_fmt(vm)} ({hm}) vs {_fmt(vo)} ({ho})")
    return lines


def jsonable(sem: Semantic) -> dict[str, list[Any]]:
    return {k: [list(v) if isinstance(v, tuple) else v, how] for k, (v, how) in sem.items()}


def from_json(sem: Mapping[str, Any]) -> dict[str, tuple[Any, str]]:
    return {k: (tuple(v) if isinstance(v, list) else v, how) for k, (v, how) in sem.items()}
