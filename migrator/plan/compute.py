"""Compute time of one micro-batch: each GEMM of a layer on its real (sharded) shape, the attention core,
and the memory-bound element-wise work (docs/plan.md section 3).

A GEMM of m x k by k x n takes max(its HBM bytes / bandwidth, 2mkn / (peak x gemm_efficiency) +
gemm_overhead_s): a roofline whose compute side loses a fixed time per call, so the efficiency of a GEMM
grows with its size (F / (F + F_half), F_half = peak x overhead) and a thin TP shard or an expert with few
tokens runs below the large-GEMM efficiency. `gemm_model=constant` turns the curve off.
"""

from __future__ import annotations

from dataclasses import dataclass

from .assumptions import Assumptions
from .cost import BYTES, Layout, activation_bytes_per_layer
from .model import ModelShape


@dataclass(frozen=True)
class Device:
    peak_flops: float   # FLOP/s of the matmul dtype
    hbm_bytes_s: float


def gemm_s(m: float, k: float, n: float, dev: Device, a: Assumptions, count: float = 1.0) -> float:
    """`count` GEMMs of m x k @ k x n (forward)."""
    if m <= 0 or k <= 0 or n <= 0 or count <= 0:
        return 0.0
    flops = 2 * m * k * n
    if a.gemm_model == "constant":
        return count * flops / (dev.peak_flops * a.gemm_efficiency)
    compute = flops / (dev.peak_flops * a.gemm_efficiency) + a.gemm_overhead_s
    memory = BYTES * (m * k + k * n + m * n) / dev.hbm_bytes_s
    return count * max(compute, memory)


def tokens_per_expert(model: ModelShape, tokens: float, layout: Layout, a: Assumptions) -> float:
    """Rows of each local expert's GEMMs: the device's tokens x top-k spread over experts / ep local experts,
    times the EP group gathering them (balanced routing) and the capacity factor's padding."""
    return tokens * model.top_k * layout.ep / model.experts * a.capacity_factor


def layer_forward_s(model: ModelShape, tokens: float, seq: int, layout: Layout, dev: Device, a: Assumptions,
                    moe_layer: bool) -> dict[str, float]:
    """Forward seconds of one layer for `tokens` rows per device (micro-batch x s / cp), by part."""
    h, t = model.hidden, layout.tp
    heads = model.heads
    if model.mla:
        q = (gemm_s(tokens, h, model.q_lora, dev, a) + gemm_s(tokens, model.q_lora, heads * model.qk_dim() / t, dev, a)
             if model.q_lora else gemm_s(tokens, h, heads * model.qk_dim() / t, dev, a))
        proj = (q + gemm_s(tokens, h, model.kv_lora + model.rope_dim, dev, a)
                + gemm_s(tokens, model.kv_lora, heads * (model.nope_dim + model.v_dim) / t, dev, a)
                + gemm_s(tokens, heads * model.v_dim / t, h, dev, a))
    else:
        qkv = (heads * model.head_dim + 2 * model.kv_heads * model.head_dim) / t
        proj = gemm_s(tokens, h, qkv, dev, a) + gemm_s(tokens, heads * model.head_dim / t, h, dev, a)
    ups = 2 if model.gated_mlp else 1

    def mlp(rows: float, width: float, count: float = 1.0) -> float:
        return gemm_s(rows, h, ups * width / t, dev, a, count) + gemm_s(rows, width / t, h, dev, a, count)

    if moe_layer:
        rows = tokens_per_expert(model, tokens, layout, a)
        experts = mlp(rows, model.expert_ffn, model.experts / layout.ep)
        shared = mlp(tokens, model.shared_width())
        dense = shared + gemm_s(tokens, h, model.experts, dev, a)  # + the router
    else:
        experts, dense = 0.0, mlp(tokens, model.ffn)
    # attention core: QK^T and AV, 2 x 2 s_q s_kv d per head; flash skips the masked half of a causal sequence
    core_flops = 2 * 2 * tokens * seq * heads / t * (model.qk_dim() + model.value_dim()) / 2
    if a.attention == "flash":
        core = core_flops / 2 / (dev.peak_flops * a.attention_efficiency)
    else:  # eager: two batched GEMMs over the full s x s scores
        core = gemm_s(seq, model.qk_dim(), seq, dev, a, tokens / seq * heads / t) + \
            gemm_s(seq, seq, model.value_dim(), dev, a, tokens / seq * heads / t)
    traffic = activation_bytes_per_layer(model, tokens / layout.micro_batch, layout.micro_batch, t, "none",
                                         a.attention, dropout=a.dropout > 0, sp=layout.sp)
    elementwise = a.nongemm_passes * traffic / dev.hbm_bytes_s
    return {"gemm": proj + dense, "experts": experts, "attention": core, "element-wise": elementwise}


def microbatch_s(model: ModelShape, layout: Layout, seq: int, dev: Device, a: Assumptions) -> dict[str, float]:
    """Seconds of one micro-batch's forward + backward (+ recomputation) on the slowest pipeline stage, by
    part. Backward GEMMs cost 2x forward; flash attention's backward 2.5x (it recomputes the scores);
    full recomputation repeats the forward, selective the attention core."""
    tokens = layout.micro_batch * seq / layout.cp
    here = -(-model.layers // layout.pp)
    moe_share = model.moe_layers / model.layers if model.moe else 0.0
    dense_part = layer_forward_s(model, tokens, seq, layout, dev, a, False) if moe_share < 1 else {}
    moe_part = layer_forward_s(model, tokens, seq, layout, dev, a, True) if moe_share > 0 else {}
    out: dict[str, float] = {}
    for part in ("gemm", "experts", "attention", "element-wise"):
        fwd = (1 - moe_share) * dense_part.get(part, 0.0) + moe_share * moe_part.get(part, 0.0)
        back = 2.5 if (part == "attention" and a.attention == "flash") else 2.0
        again = {"full": 1.0, "selective": 1.0 if part == "attention" and a.attention == "eager" else 0.0,
                 "none": 0.0}[layout.recompute]
        out[part] = here * fwd * (1 + back + again)
    logits = gemm_s(tokens, model.hidden, model.vocab / layout.tp, dev, a)
    out["gemm"] += 3 * logits / layout.pp  # the output layer, spread over the stages
    return out
