"""Compute time of one micro-batch: each GEMM of a layer on its real (sharded) shape, the attention core,
the memory-bound element-wise work and the MoE and FP8 extras (docs/plan.md section 3).

A GEMM of m x k by k x n takes max(its HBM bytes / bandwidth, 2mkn / (peak x gemm_efficiency) +
gemm_overhead_s): a roofline whose compute side loses a fixed time per call, so the efficiency of a GEMM
grows with its size (F / (F + F_half), F_half = peak x overhead) and a thin TP shard or an expert with few
tokens runs below the large-GEMM efficiency. `gemm_model=constant` turns the curve off.

FP8 (`--dtype fp8`): a linear layer's GEMM runs in FP8 at the FP8 peak (1-byte operands) plus the cast of
its operands (`fp8_cast_bytes` per element: quantize, transpose, amax), but only where that beats BF16 —
so small GEMMs stay BF16; the attention core, the router and the LM head always run BF16.

MoE: besides the expert GEMMs, the router and the permute traffic, every dispatch and combine (forward and
backward) costs a fixed `moe_dispatch_s`: the per-expert token counts go to the host to size the
all-to-all (a device-to-host sync) and the chain of small kernels around it runs host-bound. It is the one
MoE constant fitted to a published run per hardware family (calibration.py).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from .assumptions import Assumptions
from .cost import BYTES, Layout, activation_bytes_per_layer
from .model import ModelShape

ROUTER_PASSES = 3.0  # fp32 router logits read by the softmax, the top-k and the aux-loss (Switch / GShard)
DISPATCHES_PER_FORWARD = 2  # an MoE layer's forward dispatches its tokens and combines them: two all-to-all chains


@dataclass(frozen=True)
class Device:
    peak_flops: float   # FLOP/s of BF16/FP16 matmuls (the dtype's peak for a non-FP8 plan)
    hbm_bytes_s: float
    fp8_flops: float = 0.0  # FP8 matmul FLOP/s when the plan runs FP8 GEMMs (0: none)


def _gemm_one(m: float, k: float, n: float, peak: float, operand_bytes: float, dev: Device, a: Assumptions) -> float:
    flops = 2 * m * k * n
    if a.gemm_model == "constant":
        return flops / (peak * a.gemm_efficiency)
    compute = flops / (peak * a.gemm_efficiency) + a.gemm_overhead_s
    memory = (operand_bytes * (m * k + k * n) + BYTES * m * n) / dev.hbm_bytes_s
    return max(compute, memory)


def gemm_split(m: float, k: float, n: float, dev: Device, a: Assumptions, count: float = 1.0,
               fp8: bool = True) -> tuple[float, float]:
    """(GEMM seconds, FP8 cast seconds) of `count` GEMMs of m x k @ k x n (forward). FP8 only when the plan has
    an FP8 peak, the layer may run FP8 (`fp8`) and the FP8 GEMM plus its cast is faster than BF16."""
    if m <= 0 or k <= 0 or n <= 0 or count <= 0:
        return 0.0, 0.0
    bf16 = _gemm_one(m, k, n, dev.peak_flops, BYTES, dev, a)
    if fp8 and dev.fp8_flops:
        cast = a.fp8_cast_bytes * (m * k + k * n) / dev.hbm_bytes_s
        low = _gemm_one(m, k, n, dev.fp8_flops, 1, dev, a)
        if low + cast < bf16:
            return count * low, count * cast
    return count * bf16, 0.0


def gemm_s(m: float, k: float, n: float, dev: Device, a: Assumptions, count: float = 1.0, fp8: bool = True) -> float:
    """`count` GEMMs of m x k @ k x n (forward), FP8 cast included."""
    return sum(gemm_split(m, k, n, dev, a, count, fp8))


@dataclass
class _Tally:  # built up while one layer's GEMMs are priced, then read
    dev: Device
    a: Assumptions
    cast: float = 0.0
    parts: dict[str, float] = field(default_factory=dict)

    def gemm(self, m: float, k: float, n: float, count: float = 1.0, fp8: bool = True) -> float:
        seconds, cast = gemm_split(m, k, n, self.dev, self.a, count, fp8)
        self.cast += cast
        return seconds


def tokens_per_expert(model: ModelShape, tokens: float, layout: Layout, a: Assumptions) -> float:
    """Rows of each local expert's GEMMs on the busiest device: the device's tokens x top-k spread over
    experts / ep local experts, times the EP group gathering them (balanced routing), the capacity factor's
    padding and the load-imbalance skew. `tokens` are the rows the TP group shares (its ETP slice gathers
    tokens x etp / tp of them)."""
    return tokens / layout.tp * layout.expert_tp * model.top_k * layout.ep / model.experts * a.capacity_factor \
        * a.moe_imbalance


def _moe_layer(model: ModelShape, tokens: float, layout: Layout, tally: _Tally) -> dict[str, float]:
    """Routed experts (grouped GEMMs at the per-expert row count, ETP-sharded), the router (BF16 GEMM + fp32
    softmax / top-k / aux-loss passes over tokens x experts) and the permute / unpermute traffic."""
    a, dev, h = tally.a, tally.dev, model.hidden
    ups = 2 if model.gated_mlp else 1
    rows = tokens_per_expert(model, tokens, layout, a)
    local, width = model.experts / layout.ep, model.expert_ffn / layout.expert_tp
    experts = tally.gemm(rows, h, ups * width, local) + tally.gemm(rows, width, h, local)
    own = tokens / layout.tp if layout.sp else tokens  # the router sees each token once per SP shard
    router = tally.gemm(own, h, model.experts, fp8=False) + ROUTER_PASSES * own * model.experts * 4 / dev.hbm_bytes_s
    routed = rows * local  # the top-k copies this device holds after dispatch
    permute = a.moe_permute_passes * routed * h * BYTES / dev.hbm_bytes_s
    return {"experts": experts, "moe router": router, "moe permute": permute,
            "moe dispatch sync": DISPATCHES_PER_FORWARD * a.moe_dispatch_s}


def layer_forward_s(model: ModelShape, tokens: float, seq: int, layout: Layout, dev: Device, a: Assumptions,
                    moe_layer: bool) -> dict[str, float]:
    """Forward seconds of one layer for `tokens` rows per device (micro-batch x s / cp), by part."""
    h, t = model.hidden, layout.tp
    heads = model.heads
    tally = _Tally(dev, a)
    g = tally.gemm
    if model.mla:
        q = (g(tokens, h, model.q_lora) + g(tokens, model.q_lora, heads * model.qk_dim() / t)
             if model.q_lora else g(tokens, h, heads * model.qk_dim() / t))
        proj = (q + g(tokens, h, model.kv_lora + model.rope_dim)
                + g(tokens, model.kv_lora, heads * (model.nope_dim + model.v_dim) / t)
                + g(tokens, heads * model.v_dim / t, h))
    else:
        qkv = (heads * model.head_dim + 2 * model.kv_heads * model.head_dim) / t
        proj = g(tokens, h, qkv) + g(tokens, heads * model.head_dim / t, h)
    ups = 2 if model.gated_mlp else 1

    def mlp(rows: float, width: float) -> float:
        return g(rows, h, ups * width / t) + g(rows, width / t, h)

    moe: dict[str, float] = {}
    if moe_layer:
        moe = _moe_layer(model, tokens, layout, tally)
        dense = mlp(tokens, model.shared_width())
    else:
        dense = mlp(tokens, model.ffn)
    # attention core (BF16): QK^T and AV, 2 x 2 s_q s_kv d per head; flash skips the masked half of a causal sequence
    core_flops = 2 * 2 * tokens * seq * heads / t * (model.qk_dim() + model.value_dim()) / 2
    if a.attention == "flash":
        core = core_flops / 2 / (dev.peak_flops * a.attention_efficiency)
    else:  # eager: two batched GEMMs over the full s x s scores
        core = gemm_s(seq, model.qk_dim(), seq, dev, a, tokens / seq * heads / t, fp8=False) + \
            gemm_s(seq, seq, model.value_dim(), dev, a, tokens / seq * heads / t, fp8=False)
    traffic = activation_bytes_per_layer(model, tokens / layout.micro_batch, layout.micro_batch, t, "none",
                                         a.attention, dropout=a.dropout > 0, sp=layout.sp)
    elementwise = a.nongemm_passes * traffic / dev.hbm_bytes_s
    return {"gemm": proj + dense, "experts": moe.get("experts", 0.0), "attention": core,
            "element-wise": elementwise, "moe router": moe.get("moe router", 0.0),
            "moe permute": moe.get("moe permute", 0.0), "moe dispatch sync": moe.get("moe dispatch sync", 0.0),
            "fp8 quantize": tally.cast}


PARTS = ("gemm", "experts", "attention", "element-wise", "moe router", "moe permute", "moe dispatch sync",
         "fp8 quantize")


def _passes(part: str, a: Assumptions, recompute: str) -> float:
    """Forward-equivalents of a part in one micro-batch: forward + backward (GEMMs 2x, flash attention 2.5x: it
    recomputes the scores; a dispatch / combine once more: its backward is one all-to-all chain) + recomputation
    (full: the forward again; selective: eager attention's core)."""
    back = 2.5 if (part == "attention" and a.attention == "flash") else 1.0 if part == "moe dispatch sync" else 2.0
    again = {"full": 1.0, "selective": 1.0 if part == "attention" and a.attention == "eager" else 0.0,
             "none": 0.0}[recompute]
    return 1 + back + again


def microbatch_s(model: ModelShape, layout: Layout, seq: int, dev: Device, a: Assumptions) -> dict[str, float]:
    """Seconds of one micro-batch's forward + backward (+ recomputation) on the slowest pipeline stage, by
    part (`_passes`: forward, backward, recomputation). The LM head runs on the last
    stage: the slowest stage is the fullest one or the last one with the head (`Layout.last` moves layers
    off the last stage)."""
    tokens = layout.micro_batch * seq / layout.cp
    moe_share = model.moe_layers / model.layers if model.moe else 0.0
    dense_part = layer_forward_s(model, tokens, seq, layout, dev, a, False) if moe_share < 1 else {}
    moe_part = layer_forward_s(model, tokens, seq, layout, dev, a, True) if moe_share > 0 else {}
    per_layer: dict[str, float] = {}
    for part in PARTS:
        fwd = (1 - moe_share) * dense_part.get(part, 0.0) + moe_share * moe_part.get(part, 0.0)
        per_layer[part] = fwd * _passes(part, a, layout.recompute)
    head = 3 * gemm_s(tokens, model.hidden, model.vocab / layout.tp, dev, a, fp8=False)  # BF16 LM head
    fullest = layout.stage_layers(model.layers)
    last = model.layers - (layout.pp - 1) * fullest if not layout.last else layout.last
    last = max(0, min(last, fullest)) if layout.pp > 1 else model.layers
    per_sum = sum(per_layer.values())
    layers, head_here = (last, head) if last * per_sum + head > fullest * per_sum else (fullest, 0.0)
    out = {part: layers * v for part, v in per_layer.items()}
    out["gemm"] += head_here if layout.pp > 1 else head
    return out


def best_last_stage(model: ModelShape, layout: Layout, seq: int, dev: Device, a: Assumptions) -> int:
    """The last stage's layer count that makes the slowest stage fastest (the head's time in layers moved to the
    other stages); 0 when the even split is already best or there is no pipeline."""
    if layout.pp == 1:
        return 0
    best, best_s = 0, sum(microbatch_s(model, layout, seq, dev, a).values())
    for last in range(1, -(-model.layers // layout.pp)):
        seconds = sum(microbatch_s(model, replace(layout, last=last), seq, dev, a).values())
        if seconds < best_s * 0.999:
            best, best_s = last, seconds
    return best
