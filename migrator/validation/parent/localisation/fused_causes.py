"""A fused op's cause in the user's words (issue 37 item 6; parent side, torch only inside the functions).

Where the data-flow walk (:mod:`.dataflow`) ends on a torch_npu fused op, or on an op of the port
that only feeds one (the ``cat`` before ``npu_swiglu``, the ``triu`` that builds ``atten_mask``),
the fused op's arguments are compared with what the original's eager subgraph did, read from the
original trace, and the difference is said as what it means:

* ``npu_fusion_attention``: its ``scale`` against the factor the original multiplied the scores by,
  its mask against the pattern the original's softmax ended up with (:mod:`.fused_attention`);
* ``npu_swiglu``: the port's input re-run with its halves swapped (and split over another dim): the
  alternative the original computed names the gate/up order (or split dim) the port got wrong;
* ``npu_rotary_mul``: the port's inputs re-run with the other ``rotary_mode`` (and cos/sin layout):
  the one that gives an output the original has is the layout the original used;
* ``npu_rms_norm``: ``epsilon`` against the original module's ``eps`` or the constant it added.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ... import op_semantics as S
from . import fused_attention as A
from . import trace_graph as G

if TYPE_CHECKING:
    from torch import Tensor

    from .trace_graph import Trace

EPS_ATTRS = ("eps", "variance_epsilon", "epsilon", "norm_eps")
ROTARY = {"half": "rotate-half (NeoX)", "interleave": "interleaved pairs (GPT-J)"}
COS_SIN = {"halves": "in two halves (cat([f, f]), NeoX)", "pairs": "repeated in pairs (repeat_interleave(2), GPT-J)"}


@dataclass(frozen=True)
class FusedCause:
    """What a fused op did differently from the subgraph it replaced."""

    index: int  # the migrated fused op
    text: str  # the cause in the user's words
    original_op: str  # what the original computed there
    original_index: int | None  # the original op whose output the fused op's stands for
    own: bool  # the fused op's own arguments (or its input's order) are to blame, not how an input was built
    restates: frozenset[str] = frozenset()  # the argument-diff keys the cause says again, in words


@dataclass(frozen=True)
class Context:
    orig: Trace
    mig: Trace
    matched: dict[int, int | None]  # migrated op -> the original op it agrees with (-1: agrees, None: diverges)
    limit: float  # rel_l2 at which two outputs agree
    match: Callable[[Tensor], int | None]  # an original op whose output agrees with a tensor


def find(ctx: Context, path: list[int]) -> FusedCause | None:
    """The first fused op from the walk's cause downstream along its path (``path`` runs from the
    last diverging op back to the cause), with what it did differently; None when it did nothing
    differently or no fused op is on the path."""
    for f in reversed(path):
        explain = CAUSES.get(ctx.mig.events[f]["op"])
        if explain is not None:
            return explain(ctx, f)
    return None


def _attention(ctx: Context, f: int) -> FusedCause | None:
    found = A.cause(ctx.orig, ctx.mig, f, ctx.matched)
    if found is None:
        return None
    return FusedCause(f, found.text, found.original.ops, found.original.output, found.own, found.restates)


def _close(a: Tensor, b: Tensor, limit: float) -> bool:
    from ... import metrics as M

    return tuple(a.shape) == tuple(b.shape) and M.rel_l2(a, b) <= limit


def _swiglu(ctx: Context, f: int) -> FusedCause | None:
    """``npu_swiglu(x) = silu(first half) * second half``: the port's own input re-run with the halves
    swapped, and split over each other even dim; the alternative whose output the original has is
    what the original computed. Else the half the original's silu read, where that is traced."""
    import torch

    event = ctx.mig.events[f]
    x = G.read_tensor(ctx.mig, event["inputs"][0]) if event.get("inputs") else None
    dim = int(S.from_json(event["semantic"]).get("split dim", (-1, ""))[0]) if event.get("semantic") else -1
    if x is None or x.dim() == 0 or x.shape[dim] % 2:
        return None
    dim %= x.dim()
    for d in [dim] + [d for d in range(x.dim()) if d != dim and x.shape[d] % 2 == 0]:
        first, second = x.chunk(2, dim=d)
        for swapped in (True, False) if d != dim else (True,):
            gate, up = (second, first) if swapped else (first, second)
            o = ctx.match(torch.nn.functional.silu(gate) * up)
            if o is not None:
                return _swiglu_cause(ctx, f, o, swapped, None if d == dim else (dim, d))
    return _swiglu_by_gate(ctx, f, x, dim)


def _swiglu_cause(ctx: Context, f: int, product: int, swapped: bool, dims: tuple[int, int] | None) -> FusedCause:
    """The alternative that gave the original's ``product``, its gate and up named by the projections
    the original's ``silu`` and its other factor read."""
    sources = ctx.orig.events[product].get("inputs", [])
    silu = next((s for s in sources if s[0] == "op" and ctx.orig.events[s[1]]["op"] in ("silu", "silu_")), None)
    other = next((s for s in sources if s is not silu), None)
    silu_input = ctx.orig.events[silu[1]].get("inputs", [None])[0] if silu is not None else None
    gate_name = (G.projection(ctx.orig, silu_input) if silu_input else None) or "gate"
    up_projection = G.projection(ctx.orig, other) if other is not None else None
    up_name = up_projection or "up"
    said = f"silu({gate_name}) * {up_name}"
    if dims is None:
        text = (f"SwiGLU halves swapped: the port activates the {up_name} {'projection' if up_projection else 'half'} "
                "(npu_swiglu applies silu to the "
                f"first half of its input, so the gate/up order is gate first; the original computes {said}); "
                f"put {gate_name} first")
    else:
        text = (f"SwiGLU split dim: npu_swiglu splits dim {dims[0]}, the original's gate/up halves lie along dim "
                f"{dims[1]}" + (" and in the other order" if swapped else "") +
                f" (the original computes {said}); pass dim={dims[1]}")
    return FusedCause(f, text, said, product, True, frozenset({"split dim"}))


def _swiglu_by_gate(ctx: Context, f: int, x: Tensor, dim: int) -> FusedCause | None:
    """The half the original's silu read, where its input is traced."""
    first, second = x.chunk(2, dim=dim)
    kids = G.readers(ctx.orig)
    for i, o in enumerate(ctx.orig.events):
        if o["op"] not in ("silu", "silu_") or not o.get("inputs"):
            continue
        gate = G.read_tensor(ctx.orig, o["inputs"][0])
        if gate is None or not _close(second, gate, ctx.limit) or _close(first, gate, ctx.limit):
            continue
        gate_name = G.projection(ctx.orig, o["inputs"][0]) or "gate"
        up = ctx.match(first)
        up_name = (G.projection(ctx.orig, ["op", up]) if up is not None else None) or "up"
        product = next((c for c in kids.get(i, []) if ctx.orig.events[c]["op"] in ("mul", "mul_")), None)
        text = (f"SwiGLU halves swapped: the port activates the {up_name} projection (npu_swiglu applies silu to "
                f"the first half of its input; the original computes silu({gate_name}) * {up_name}); "
                f"put {gate_name} first")
        return FusedCause(f, text, f"silu({gate_name}) * {up_name}", product, True, frozenset({"split dim"}))
    return None


def _cos_sin_layout(r: Tensor) -> str | None:
    import torch

    d = r.shape[-1]
    halves = torch.equal(r[..., : d // 2], r[..., d // 2:])
    pairs = torch.equal(r[..., 0::2], r[..., 1::2])
    return None if halves == pairs else ("halves" if halves else "pairs")


def _relayout(r: Tensor, layout: str) -> Tensor:
    import torch

    if layout == "halves":  # to pairs
        return r[..., : r.shape[-1] // 2].repeat_interleave(2, dim=-1)
    return torch.cat([r[..., 0::2], r[..., 0::2]], dim=-1)


def rope(x: Tensor, cos: Tensor, sin: Tensor, mode: str) -> Tensor:
    """``x·cos + rotate(x)·sin`` as npu_rotary_mul computes it, for ``half`` or ``interleave``."""
    import torch

    d = x.shape[-1]
    if mode == "half":
        rotated = torch.cat((-x[..., d // 2:], x[..., : d // 2]), dim=-1)
    else:
        rotated = torch.stack((-x[..., 1::2], x[..., 0::2]), dim=-1).flatten(-2)
    return x * cos + rotated * sin


def _rotary(ctx: Context, f: int) -> FusedCause | None:
    """The port's own inputs re-run in the other layouts: the one whose output the original has."""
    event = ctx.mig.events[f]
    tensors = [G.read_tensor(ctx.mig, src) for src in event.get("inputs", [])[:3]]
    if len(tensors) < 3 or any(t is None for t in tensors) or not event.get("semantic"):
        return None
    x, cos, sin = (t for t in tensors if t is not None)
    if x.shape[-1] % 2 or cos.shape[-1] != x.shape[-1]:
        return None
    mode_m = str(S.from_json(event["semantic"]).get("rotary mode", ("half", ""))[0])
    layout_m = _cos_sin_layout(cos)
    tries = [(mode, False) for mode in ROTARY if mode != mode_m]
    if layout_m is not None:
        tries += [(mode, True) for mode in ROTARY]
    for mode, relayout in tries:
        c, s = (_relayout(cos, layout_m), _relayout(sin, layout_m)) if relayout and layout_m else (cos, sin)
        o = ctx.match(rope(x, c, s, mode))
        if o is None:
            continue
        advice = f"pass rotary_mode=\"{mode}\"" if mode != mode_m else ""
        if relayout and layout_m:
            other = "pairs" if layout_m == "halves" else "halves"
            text = (f"rotary cos/sin layout: the port passes cos/sin {COS_SIN[layout_m]}, the original rotates "
                    f"{ROTARY[mode]} with cos/sin {COS_SIN[other]}" + (f"; {advice}" if advice else ""))
        else:
            text = f"rotary layout: the port uses {ROTARY[mode_m]}, the original {ROTARY[mode]}; {advice}"
        starts = G.starts_for(ctx.orig, ctx.mig, event["inputs"][0], ctx.matched)
        ops = (G.ancestors(ctx.orig, o) & G.descendants(ctx.orig, starts)) | {o} if starts else {o}
        return FusedCause(f, text, f"eager rotary: {G.op_names(ctx.orig, ops)}", o, True, frozenset({"rotary mode"}))
    return None


def _original_eps(ctx: Context, event: dict[str, Any]) -> tuple[float, str] | None:
    """The original's eps where the port calls npu_rms_norm: the module's attribute, a known norm op's
    argument, or the constant added before ``rsqrt``/``sqrt`` in the module."""
    module = ctx.orig.modules.get(event.get("module") or "") or {}
    for attr in EPS_ATTRS:
        value = module.get(attr)
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value), f"{module.get('class', 'module')}.{attr}"
    same = [o for o in ctx.orig.events if o.get("module") == event.get("module")]
    for o in same:
        eps = (o.get("semantic") or {}).get("eps")
        if o["kind"] in ("rms_norm", "layer_norm") and eps and isinstance(eps[0], (int, float)):
            return float(eps[0]), f"{o['op']} {eps[1]}"
    roots = {src[1] for o in same if o["op"] in ("rsqrt", "sqrt") for src in o.get("inputs", []) if src[0] == "op"}
    for i in sorted(roots):
        c = G.constant(ctx.orig.events[i]) if ctx.orig.events[i]["op"] in ("add", "add_", "iadd") else None
        if c is not None:
            return c, f"added before the root in {module.get('class', 'the module')}"
    return None


def _rms_norm(ctx: Context, f: int) -> FusedCause | None:
    event = ctx.mig.events[f]
    if not event.get("semantic"):
        return None
    eps_m, how = S.from_json(event["semantic"]).get("eps", (None, ""))
    original = _original_eps(ctx, event)
    if eps_m is None or original is None or abs(float(eps_m) - original[0]) <= 1e-9 * max(abs(original[0]), 1e-30):
        return None
    eps_o, where = original
    default = " (npu_rms_norm's default)" if how == "npu default" else ""
    text = (f"RMSNorm eps: the port uses {S.format_value(float(eps_m))}{default}, the original "
            f"{S.format_value(eps_o)} ({where}); pass epsilon={S.format_value(eps_o)}")
    module = ctx.orig.modules.get(event.get("module") or "") or {}
    same = [i for i, o in enumerate(ctx.orig.events) if o.get("module") == event.get("module")
            and o["shape"] == event["shape"]]  # the module's last op of the output's shape: what the norm returns
    known = [i for i in same if ctx.orig.events[i]["kind"] in ("rms_norm", "layer_norm")]
    if known:  # a norm op of its own (apex FusedRMSNorm, F.rms_norm)
        return FusedCause(f, text, ctx.orig.events[known[0]]["op"], known[0], True, frozenset({"eps"}))
    return FusedCause(f, text, f"{module.get('class', 'RMSNorm')} in primitive ops", same[-1] if same else None, True,
                      frozenset({"eps"}))


CAUSES: dict[str, Callable[[Context, int], FusedCause | None]] = {
    "npu_fusion_attention": _attention, "npu_swiglu": _swiglu, "npu_rotary_mul": _rotary, "npu_rms_norm": _rms_norm}
