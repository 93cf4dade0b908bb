"""``npu_fusion_attention`` against what the original computed in its place (parent side; torch only
inside the functions): the eager subgraph (``q @ kᵀ``, a scale, a mask, softmax, ``@ v``) or a known
attention op, read from the original's op trace — the scale it multiplied by (from the scores
themselves, else the ``mul``/``div`` constants), the attention pattern its softmax ended up with
(zero probability = masked), and how it masked — then said in the user's words:
``scale: the port uses 1.0 (npu_fusion_attention's default), the original 0.125 (= 1/sqrt(64))``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ... import attention_pattern as P
from ... import op_semantics as S
from . import trace_graph as G

if TYPE_CHECKING:
    from torch import Tensor

    from .trace_graph import Trace

SOFTMAX = frozenset({"softmax", "_softmax", "softmax_"})
PRODUCT = frozenset({"matmul", "bmm", "einsum", "baddbmm"})
SCALE_MUL = frozenset({"mul", "mul_", "imul", "rmul"})
SCALE_DIV = frozenset({"div", "div_", "truediv", "itruediv"})
MASKING = {"where": "torch.where", "masked_fill": "masked_fill", "masked_fill_": "masked_fill",
           "add": "an additive mask", "add_": "an additive mask", "iadd": "an additive mask"}


@dataclass(frozen=True)
class Eager:
    """What the original computed where the port calls the fused attention."""

    scale: float | None
    pattern: str | None  # attention_pattern code: which query sees which key
    masked_by: str  # how the original masked: "torch.where", "masked_fill", "is_causal / attn_mask" ...
    output: int | None  # the original op whose output the fused op's stands for
    ops: str  # its op names, for the report


def _close(a: float, b: float, rel: float = 1e-3) -> bool:
    return abs(a - b) <= rel * max(abs(a), abs(b), 1e-12)


def number(v: float) -> str:
    """``1.0``, ``0.125``, ``0.3536``: a round value keeps its ``.0``."""
    return f"{v:.1f}" if float(v).is_integer() else f"{v:.4g}"


def _as_root(v: float, d: int) -> str:
    if d > 0 and _close(v, 1 / math.sqrt(d)):
        return f" (= 1/sqrt({d}))"
    if d > 0 and _close(v, 1 / d):
        return f" (= 1/{d})"
    return ""


def eager(orig: Trace, mig: Trace, f: int, matched: dict[int, int | None]) -> Eager | None:
    """The original's attention where migrated op ``f`` (a fused attention) stands: the ops reading
    what ``f``'s query and key agree with, down to the first softmax (or a known attention op)."""
    event = mig.events[f]
    starts = set().union(*(G.starts_for(orig, mig, src, matched) for src in event.get("inputs", [])[:2]))
    if starts:
        below = sorted(G.descendants(orig, starts))
    else:  # nothing agrees upstream: the same module's ops
        below = [i for i, o in enumerate(orig.events) if o.get("module") == event.get("module")]
    known = next((i for i in below if orig.events[i]["kind"] == "attention" and orig.events[i].get("semantic")), None)
    soft = next((i for i in below if orig.events[i]["op"] in SOFTMAX), None)
    if known is not None and (soft is None or known < soft):
        sem = S.from_json(orig.events[known]["semantic"])
        causal, how = sem.get("causal alignment", ("none", ""))
        return Eager(float(sem["scale"][0]), sem.get("attention pattern", (None, ""))[0],
                     str(how) if causal not in ("none", "given mask") else "its attn_mask", known, orig.events[known]["op"])
    if soft is None:
        return None
    between = (G.ancestors(orig, soft) & set(below)) - starts if starts else set()
    out = next((i for i in sorted(G.descendants(orig, [soft])) if orig.events[i]["op"] in PRODUCT), None)
    scale = _scores_scale(orig, mig, f, soft)
    if scale is None and starts:  # the constants between the query/key and the softmax
        scale = _constant_scale(orig, between)
    masking = [MASKING[orig.events[i]["op"]] for i in sorted(between) if orig.events[i]["op"] in MASKING]
    scores = orig.events[soft].get("inputs", [])
    pattern = _softmax_pattern(G.read_tensor(orig, scores[0]) if scores else None, orig.tensor(soft))
    return Eager(scale, pattern, masking[0] if masking else "its mask", out,
                 f"eager attention: {G.op_names(orig, between | {soft} | ({out} if out is not None else set()))}")


def _qk(mig: Trace, f: int) -> tuple[Tensor, Tensor] | None:
    """The fused op's query and key as (B, N, S, D), key heads repeated for GQA."""
    event = mig.events[f]
    layout = (event.get("semantic") or {}).get("layout", [None])[0]
    q, k = (G.read_tensor(mig, src) for src in event.get("inputs", [])[:2])
    if q is None or k is None or layout not in ("BNSD", "BSND") or q.dim() != 4 or k.dim() != 4:
        return None
    if layout == "BSND":
        q, k = q.transpose(1, 2), k.transpose(1, 2)
    if k.shape[1] != q.shape[1]:
        if k.shape[1] == 0 or q.shape[1] % k.shape[1]:
            return None
        k = k.repeat_interleave(q.shape[1] // k.shape[1], dim=1)
    return q, k


def _scores_scale(orig: Trace, mig: Trace, f: int, soft: int) -> float | None:
    """The factor between ``q @ kᵀ`` of the fused op's inputs and the original's softmax input, on the
    keys it did not mask; None where that is not a pure scaling (a bias, ALiBi) or unknown."""
    from ...metrics import MASKED_BELOW

    qk = _qk(mig, f)
    inputs = orig.events[soft].get("inputs", [])
    scores = G.read_tensor(orig, inputs[0]) if inputs else None
    if qk is None or scores is None:
        return None
    raw = qk[0].double() @ qk[1].double().transpose(-2, -1)
    if raw.numel() != scores.numel():
        return None
    raw, scores = raw.reshape(scores.shape), scores.double()
    use = scores.isfinite() & (scores > MASKED_BELOW)
    a, b = raw[use], scores[use]
    denominator = float((a * a).sum())
    if denominator == 0.0:
        return None
    s = float((a * b).sum()) / denominator
    return s if float((b - s * a).norm()) <= 1e-2 * max(float(b.norm()), 1e-30) else None


def _constant_scale(orig: Trace, between: set[int]) -> float | None:
    """The product of the ``mul``/``div`` constants on the way to the softmax (1.0 when there is no
    multiply or divide at all); None when a factor is a tensor (not read)."""
    scale, unknown = 1.0, False
    for i in between:
        event = orig.events[i]
        if event["op"] in SCALE_MUL | SCALE_DIV:
            c = G.constant(event)
            if c is None or c == 0.0:
                unknown = True
            else:
                scale *= c if event["op"] in SCALE_MUL else 1.0 / c
    return None if unknown else scale


def _softmax_pattern(scores: Tensor | None, probs: Tensor | None) -> str | None:
    """Which query saw which key in the original: the softmax's input above the masked level (a
    probability that underflowed is still seen), else its output above 0."""
    from ...metrics import MASKED_BELOW

    if scores is not None and scores.dim() in (3, 4):
        keep = scores > MASKED_BELOW
    elif probs is not None and probs.dim() in (3, 4):
        keep = probs > 0
    else:
        return None
    b, n = (keep.shape[0], keep.shape[1]) if keep.dim() == 4 else (1, keep.shape[0])
    return P.safe(lambda: P.fold(keep, b, n, keep.shape[-2], keep.shape[-1]))


def _full(keep: Tensor, rows: int) -> Tensor | None:
    """A folded ``[B or 1 or B*N, Sq, Skv]`` pattern spread to ``rows`` (B*N) rows."""
    if keep.shape[0] == rows:
        return keep
    if keep.shape[0] == 1:
        return keep.expand(rows, *keep.shape[1:])
    if rows % keep.shape[0] == 0:
        return keep.repeat_interleave(rows // keep.shape[0], dim=0)
    return None


def _kinds(extra: Tensor, original: Tensor) -> str:
    """``future and padded``: what the pairs only the port lets through are, in words."""
    import torch

    sq, skv = extra.shape[-2], extra.shape[-1]
    i = torch.arange(sq)[:, None]
    j = torch.arange(skv)[None, :]
    future = (j > i + (skv - sq)).expand_as(extra)
    padded = (~original.any(dim=-2, keepdim=True)).expand_as(extra)  # keys no query of that row sees
    words = [word for word, where in (("future", future), ("padded", padded & ~future))
             if bool((extra & where).any())]
    if bool((extra & ~future & ~padded).any()):
        words.append("masked")
    return " and ".join(words) or "masked"


def mask_cause(semantic: S.Semantic, original: Eager) -> tuple[str, bool] | None:
    """The mask in the user's words, and whether it is the fused op's own argument (omitted,
    inverted) rather than how the port built its mask."""
    code_m = semantic.get("attention pattern", (None, ""))[0]
    code_o = original.pattern
    if code_m is None or code_o is None or code_m == code_o:
        return None
    keep_m, keep_o = P.keep_array(code_m), P.keep_array(code_o)
    if keep_m is None or keep_o is None or keep_m.shape[1:] != keep_o.shape[1:]:
        return f"mask differs: {P.describe_difference(code_o, code_m)}", False
    rows = max(keep_m.shape[0], keep_o.shape[0])
    full_m, full_o = _full(keep_m, rows), _full(keep_o, rows)
    if full_m is None or full_o is None:
        return f"mask differs: {P.describe_difference(code_o, code_m)}", False
    omitted = semantic.get("mask polarity", ("", ""))[0] == "no mask" and \
        semantic.get("causal alignment", ("", ""))[0] == "none"
    extra, missing = full_m & ~full_o, full_o & ~full_m
    if bool((full_m == ~full_o).all()):
        return ("mask inverted: the port passes a keep-mask (True = attend) as atten_mask, which "
                "npu_fusion_attention reads as True = masked out, so it attends only where the original masks; "
                "pass ~mask"), True
    if bool(extra.any()) and not bool(missing.any()):
        kinds = _kinds(extra, full_o)
        if omitted:
            return (f"mask omitted: the port attends to {kinds} positions (npu_fusion_attention got no "
                    f"atten_mask; the original masks them with {original.masked_by})"), True
        return (f"mask too permissive: the port attends to {kinds} positions the original masks "
                f"({P.describe_difference(code_o, code_m)})"), False
    if bool(missing.any()) and not bool(extra.any()):
        return f"mask too strict: the port masks positions the original attends to " \
               f"({P.describe_difference(code_o, code_m)})", False
    return f"mask differs: {P.describe_difference(code_o, code_m)}", False


def scale_cause(semantic: S.Semantic, original: Eager) -> str | None:
    scale_m, how = semantic.get("scale", (None, ""))
    d = int(semantic.get("head dim", (0, ""))[0] or 0)
    if original.scale is None or scale_m is None or _close(float(scale_m), original.scale):
        return None
    default = " (npu_fusion_attention's default)" if how == "npu default" else ""
    root = d > 0 and _close(original.scale, 1 / math.sqrt(d))
    advice = "1/math.sqrt(head_dim)" if root else number(original.scale)
    return (f"scale: the port uses {number(float(scale_m))}{_as_root(float(scale_m), d)}{default}, the original "
            f"{number(original.scale)}{_as_root(original.scale, d)}; pass scale={advice}")


MASK_KEYS = ("attention pattern", "causal alignment", "mask polarity")


def cause(orig: Trace, mig: Trace, f: int, matched: dict[int, int | None]) -> Found | None:
    """The causes in the user's words, whether the fused op's own arguments are to blame, the
    argument-diff keys the causes restate, and the original's attention; None when they agree."""
    event = mig.events[f]
    original = eager(orig, mig, f, matched) if event.get("semantic") else None
    if original is None:
        return None
    semantic: dict[str, Any] = S.from_json(event["semantic"])
    texts, own, restates = [], False, set()
    scale = scale_cause(semantic, original)
    if scale:
        texts.append(scale)
        own = True
        restates.add("scale")
    mask = mask_cause(semantic, original)
    if mask:
        texts.append(mask[0])
        own = own or mask[1]
        if mask[1]:  # omitted, inverted: said in full; the others keep the diff that locates them
            restates.update(MASK_KEYS)
    return Found("; ".join(texts), own, frozenset(restates), original) if texts else None


@dataclass(frozen=True)
class Found:
    text: str
    own: bool
    restates: frozenset[str]
    original: Eager
