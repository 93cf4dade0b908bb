"""The effective semantic arguments of known op pairs, and their side-by-side diff (no torch import).

Each extractor takes the call's ``(args, kwargs)`` (tensors only read for shapes/dtypes) and returns
``{argument: (value, how it was set)}`` in one vocabulary for every library, so a CUDA op and its
Ascend replacement compare key by key (ascend-facts §c.1, §c.5):

* attention (flash_attn_func / flash_attn_varlen_func, xformers memory_efficient_attention, torch
  SDPA ↔ ``npu_fusion_attention``): ``scale``, ``causal alignment``, ``mask polarity``, ``layout``,
  ``keep_prob``, and the ``attention pattern`` they add up to (:mod:`.attention_pattern`: which query
  sees which key); when the patterns agree, alignment and polarity are only encodings and not diffed;
* norms (apex Fused*Norm, ``F.layer_norm``, ``F.rms_norm`` ↔ ``npu_rms_norm``): ``eps``, ``affine``;
* optimizers (apex FusedAdam, torch Adam/AdamW ↔ torch_npu fused ones): ``lr``, ``betas``, ``eps``,
  ``weight_decay``, ``decoupled weight decay (adam_w_mode)``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch

    from migrator.ground.jsonfile import JsonValue

from . import attention_pattern as P

Semantic = dict[str, tuple[Any, str]]
Args = Sequence[Any]  # a call's positional arguments
Kwargs = Mapping[str, Any]
KIND = {"flash_attn_func": "attention", "flash_attn_varlen_func": "attention",
        "memory_efficient_attention": "attention", "scaled_dot_product_attention": "attention",
        "npu_fusion_attention": "attention", "layer_norm": "layer_norm", "rms_norm": "rms_norm",
        "npu_rms_norm": "rms_norm", "FusedLayerNorm": "layer_norm", "FusedRMSNorm": "rms_norm",
        "MixedFusedLayerNorm": "layer_norm", "MixedFusedRMSNorm": "rms_norm", "npu_rotary_mul": "rotary",
        "npu_swiglu": "swiglu"}
LOSSES = frozenset({"cross_entropy", "nll_loss", "mse_loss", "l1_loss", "smooth_l1_loss", "huber_loss",
                    "binary_cross_entropy", "binary_cross_entropy_with_logits", "kl_div", "poisson_nll_loss"})


def _arg(args: Args, kwargs: Kwargs, index: int, name: str, default: Any = None) -> tuple[Any, bool]:
    """(value, given explicitly)."""
    if name in kwargs:
        return kwargs[name], True
    if len(args) > index:
        return args[index], True
    return default, False


def _shape(t: object) -> tuple[int, ...]:
    return tuple(getattr(t, "shape", ()) or ())


def _rsqrt_default(lib: str, d: int) -> tuple[float, str]:
    return 1.0 / math.sqrt(d), f"{lib} default 1/√{d}"


def _scale(value: float | None, given: bool, lib: str, d: int) -> tuple[Any, str]:
    if value is None:
        return _rsqrt_default(lib, d)
    return float(value), "given" if given else f"{lib} default"


def flash_attn(name: str, args: Args, kwargs: Kwargs) -> Semantic:
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
    if not varlen:
        k = args[1]
        b, sq, n = _shape(q)[0], _shape(q)[1], _shape(q)[2]
        skv = _shape(k)[1]
        left, right = tuple(window or (-1, -1))
        right = 0 if causal else right

        def keep() -> torch.Tensor:
            return P.fold(P.window(sq, skv, q, int(left), int(right)), b, n, sq, skv)

        out["attention pattern"] = (P.safe(keep), "causal / window_size")
    return out


def xformers(name: str, args: Args, kwargs: Kwargs) -> Semantic:
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
    b, sq, n = _shape(q)[0], _shape(q)[1], _shape(q)[2]
    skv = _shape(args[1])[1]

    def keep() -> torch.Tensor:
        if kind is None:
            return P.fold(P.window(sq, skv, q, -1, -1), b, n, sq, skv)
        if causal != "none":
            return P.fold(P.causal(sq, skv, q, bottom_right=causal == "bottom-right"), b, n, sq, skv)
        return P.fold(P.from_mask(bias, true_means_keep=True), b, n, sq, skv)

    return {"scale": _scale(scale, given, "xformers", _shape(q)[-1]),
            "causal alignment": (causal, kind or "no attn_bias"), "mask polarity": (polarity, how),
            "layout": ("BSND", "xformers (B, M, H, K)"), "keep_prob": (1.0 - float(p or 0.0), "1 - p"),
            "attention pattern": (P.safe(keep), "attn_bias")}


def sdpa(name: str, args: Args, kwargs: Kwargs) -> Semantic:
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
    shape = _shape(q)
    b, n, sq = (shape[0] if len(shape) > 3 else 1), (shape[-3] if len(shape) > 2 else 1), shape[-2]
    skv = _shape(args[1])[-2]

    def keep() -> torch.Tensor:
        if causal:
            return P.fold(P.causal(sq, skv, q, bottom_right=False), b, n, sq, skv)
        if mask is None:
            return P.fold(P.window(sq, skv, q, -1, -1), b, n, sq, skv)
        return P.fold(P.from_mask(mask, true_means_keep=True), b, n, sq, skv)

    return {"scale": _scale(scale, given, "SDPA", _shape(q)[-1]),
            "causal alignment": ("top-left" if causal else ("given mask" if mask is not None else "none"),
                                 "SDPA is_causal=True" if causal else "is_causal=False"),
            "mask polarity": (polarity, "attn_mask"), "layout": ("BNSD", "SDPA (B, N, S, D)"),
            "keep_prob": (1.0 - float(dropout or 0.0), "1 - dropout_p"),
            "attention pattern": (P.safe(keep), "attn_mask / is_causal")}


_SPARSE = {0: "given mask", 1: "given mask", 2: "top-left", 3: "bottom-right", 4: "band, bottom-right origin",
           5: "prefix", 6: "prefix", 7: "bottom-right (varlen split)", 8: "top-left (varlen split)"}


def npu_fusion_attention(name: str, args: Args, kwargs: Kwargs) -> Semantic:
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
    head_num, _ = _arg(args, kwargs, 3, "head_num", 1)
    d = (_shape(_arg(args, kwargs, 0, "query")[0]) or (0,))[-1]
    head_dim = d // max(int(head_num), 1) if str(layout) in ("BSH", "SBH") else d
    return {"scale": (float(scale), "given" if given else "npu default"), "head dim": (head_dim, "query shape"),
            "causal alignment": (causal, f"sparse_mode {mode}"), "mask polarity": (polarity, "atten_mask"),
            "layout": (str(layout), "input_layout"), "keep_prob": (float(keep), "keep_prob"),
            "attention pattern": (P.safe(lambda: _npu_pattern(args, kwargs, str(layout), mask, mode)),
                                  "atten_mask (True = masked out) / sparse_mode")}


_NPU_DIMS = {"BSND": (0, 1, 2), "BNSD": (0, 2, 1), "BSH": (0, 1, None), "SBH": (1, 0, None)}  # b, s, n axes


def _npu_pattern(args: Args, kwargs: Kwargs, layout: str, mask: torch.Tensor | None, mode: int) -> torch.Tensor:
    q, k = args[0], args[1]
    b_ax, s_ax, n_ax = _NPU_DIMS[layout]  # TND (varlen) raises KeyError: not compared
    head_num, _ = _arg(args, kwargs, 3, "head_num", 1)
    b, sq, skv = _shape(q)[b_ax], _shape(q)[s_ax], _shape(k)[s_ax]
    n = _shape(q)[n_ax] if n_ax is not None else int(head_num)
    pre, _ = _arg(args, kwargs, 10, "pre_tockens", 2147483647)
    nxt, _ = _arg(args, kwargs, 11, "next_tockens", 2147483647)
    if mode in (0, 1):
        keep = P.window(sq, skv, q, -1, -1) if mask is None else P.from_mask(mask, true_means_keep=False)
        if mode == 0:
            i, j = P._ij(sq, skv, q)
            keep = keep & ~(((j - i) > int(nxt)) | ((i - j) > int(pre)))
    elif mode in (2, 3):
        keep = P.causal(sq, skv, q, bottom_right=mode == 3)
    elif mode == 4:
        keep = P.window(sq, skv, q, int(pre), int(nxt))
    else:
        raise ValueError(f"sparse_mode {mode} pattern not evaluated")
    return P.fold(keep, b, n, sq, skv)


def layer_norm(name: str, args: Args, kwargs: Kwargs) -> Semantic:
    weight, _ = _arg(args, kwargs, 2, "weight", None)
    eps, given = _arg(args, kwargs, 4 if name == "layer_norm" else 3, "eps", 1e-5 if name == "layer_norm" else None)
    return {"eps": (eps, "given" if given else f"F.{name} default"), "affine": (weight is not None, "weight passed")}


def npu_rms_norm(name: str, args: Args, kwargs: Kwargs) -> Semantic:
    eps, given = _arg(args, kwargs, 2, "epsilon", 1e-6)
    return {"eps": (float(eps), "given" if given else "npu default"), "affine": (True, "gamma is mandatory")}


def npu_rotary_mul(name: str, args: Args, kwargs: Kwargs) -> Semantic:
    mode, given = _arg(args, kwargs, 3, "rotary_mode", "half")
    return {"rotary mode": (str(mode), "given" if given else "npu default")}


def npu_swiglu(name: str, args: Args, kwargs: Kwargs) -> Semantic:
    dim, given = _arg(args, kwargs, 1, "dim", -1)
    return {"split dim": (int(dim), "given" if given else "npu default")}


def loss_call(func: Callable[..., Any], name: str, args: Args, kwargs: Kwargs) -> Semantic:
    """Every argument of a loss function but its input and target, defaults included
    (``label_smoothing``, ``ignore_index``, ``reduction``, a class ``weight``)."""
    import inspect

    try:
        params = inspect.signature(func).parameters
        bound = inspect.signature(func).bind(*args, **kwargs)
    except (TypeError, ValueError):
        return {}
    out: Semantic = {}
    for key, param in list(params.items())[2:]:
        value = bound.arguments.get(key, param.default)
        default = value is param.default or (param.default is not inspect.Parameter.empty and value == param.default)
        if hasattr(value, "shape"):
            flat = value.detach().flatten().tolist() if value.numel() <= 64 else f"tensor {list(value.shape)}"
            value, default = (tuple(flat) if isinstance(flat, list) else flat), False
        elif not isinstance(value, (bool, int, float, str, type(None))):
            value = str(value)
        out[key] = (value, f"F.{name} default" if default else "given")
    return out


def norm_module(module: object) -> Semantic:
    """apex Fused*Norm (or any norm module with ``eps``): from its attributes."""
    return {"eps": (getattr(module, "eps", None), f"{type(module).__name__}(eps=...)"),
            "affine": (bool(getattr(module, "elementwise_affine", True)), "elementwise_affine")}


EXTRACTORS = {"flash_attn_func": flash_attn, "flash_attn_varlen_func": flash_attn,
              "memory_efficient_attention": xformers, "scaled_dot_product_attention": sdpa,
              "npu_fusion_attention": npu_fusion_attention, "layer_norm": layer_norm, "rms_norm": layer_norm,
              "npu_rms_norm": npu_rms_norm, "npu_rotary_mul": npu_rotary_mul, "npu_swiglu": npu_swiglu}


HYPER = ("lr", "betas", "eps", "weight_decay")


def _hyper(group: Mapping[str, Any]) -> tuple[Any, ...]:
    return tuple(tuple(float(b) for b in group[k]) if isinstance(group.get(k), (tuple, list))
                 else (float(group[k]) if isinstance(group.get(k), (int, float)) else None) for k in HYPER)


def optimizer(opt: object, names: Mapping[int, str] | None = None) -> Semantic:
    """Hyper-parameters of the first param group, in one vocabulary (apex ``adam_w_mode``, torch
    ``AdamW`` = decoupled, ``Adam`` = L2 unless ``decoupled_weight_decay``); with ``names`` (id of
    a parameter -> its name) also what each parameter gets (``per parameter``), so parameter groups
    that differ are seen even when the first groups agree."""
    groups = getattr(opt, "param_groups", None) or [{}]
    group = groups[0]
    cls = type(opt).__name__
    out: Semantic = {}
    for key, value in zip(HYPER, _hyper(group)):
        if value is not None:
            out[key] = (value, cls)
    if hasattr(opt, "adam_w_mode"):
        out["decoupled weight decay (adam_w_mode)"] = (bool(opt.adam_w_mode), f"{cls}.adam_w_mode")
    elif "Adam" in cls:
        decoupled = "AdamW" in cls or bool(group.get("decoupled_weight_decay", False))
        out["decoupled weight decay (adam_w_mode)"] = (decoupled, cls)
    if names:
        per = {names.get(id(p), f"group{g}.param{i}"): list(_hyper(grp))
               for g, grp in enumerate(groups) for i, p in enumerate(grp.get("params", []))}
        out["per parameter"] = (per, cls)
    return out


def _per_parameter_lines(original: Mapping[str, Any], migrated: Mapping[str, Any], hm: str, ho: str) -> list[str]:
    """``weight_decay: 0.1 vs 0 for 3 of 8 parameters (ln_f.weight, ...)`` for each hyper-parameter
    whose value differs for some parameter (the same value pair grouped)."""
    lines = []
    for index, key in enumerate(HYPER):
        pairs: dict[tuple[str, str], list[str]] = {}
        for name, hyper_m in migrated.items():
            hyper_o = original.get(name)
            if hyper_o is None:
                continue
            vm, vo = format_value(_tuple(hyper_m[index])), format_value(_tuple(hyper_o[index]))
            if vm != vo:
                pairs.setdefault((vm, vo), []).append(name)
        for (vm, vo), names in pairs.items():
            shown = ", ".join(names[:3]) + (", ..." if len(names) > 3 else "")
            where = "" if len(names) == len(migrated) else f" for {len(names)} of {len(migrated)} parameters ({shown})"
            lines.append(f"{key}: {vm} ({hm}) vs {vo} ({ho}){where}")
    missing = sorted(set(original) - set(migrated))
    if missing:
        lines.append(f"not given to the optimizer: {', '.join(missing[:3])}" + (", ..." if len(missing) > 3 else "")
                     + f" ({len(missing)} of {len(original)} parameters)")
    return lines


def _tuple(v: Any) -> Any:
    return tuple(v) if isinstance(v, list) else v


def format_value(v: Any) -> str:
    """An argument value as the diffs print it: floats to 4 significant digits, tuples element-wise."""
    if isinstance(v, float):
        return f"{v:.4g}"
    if isinstance(v, tuple):
        return "(" + ", ".join(format_value(x) for x in v) + ")"
    return str(v)


def diff(original: Semantic, migrated: Semantic, names: tuple[str, str]) -> list[str]:
    """``["scale: 1 (npu default) vs 0.125 (flash_attn default 1/√64)", ...]`` for the keys that
    differ: migrated first, as the rest of the report. Values are ``[value, how]`` pairs (JSON)."""
    lines = []
    pattern_o, pattern_m = (side.get("attention pattern", (None, ""))[0] for side in (original, migrated))
    same_pattern = pattern_o is not None and pattern_o == pattern_m
    for key in migrated:
        if key not in original:
            continue
        (vm, hm), (vo, ho) = migrated[key], original[key]
        if key == "attention pattern":
            if vm is not None and vo is not None and vm != vo:
                lines.append(f"attention pattern: {P.describe_difference(vo, vm)}")
            continue
        if same_pattern and key in ("causal alignment", "mask polarity"):
            continue  # two encodings of one pattern
        if key == "per parameter":
            lines.extend(_per_parameter_lines(vo, vm, hm, ho))
            continue
        if key in HYPER and "per parameter" in migrated and "per parameter" in original:
            continue  # said per parameter
        same = (abs(vm - vo) <= 1e-9 * max(abs(vo), 1.0) if isinstance(vm, float) and isinstance(vo, float)
                else format_value(vm) == format_value(vo))
        if not same:
            lines.append(f"{key}: {format_value(vm)} ({hm}) vs {format_value(vo)} ({ho})")
    return lines


def jsonable(sem: Semantic) -> dict[str, list[Any]]:
    return {k: [list(v) if isinstance(v, tuple) else v, how] for k, (v, how) in sem.items()}


def from_json(sem: Mapping[str, JsonValue]) -> Semantic:
    """A semantic record back from its JSON form (``{key: [value, how]}``, lists as tuples again)."""
    out: Semantic = {}
    for key, pair in sem.items():
        if not isinstance(pair, list) or len(pair) != 2:
            raise ValueError(f"semantic argument {key!r}: expected [value, how], found {pair!r}")
        value, how = pair
        out[key] = (tuple(value) if isinstance(value, list) else value, str(how))
    return out
