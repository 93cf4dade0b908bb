"""The analytic cost model (docs/plan.md has every formula with its source).

Memory: mixed-precision Adam model state, 16 bytes per parameter (2 weight + 2 gradient + 12 fp32 master,
momentum, variance; Rajbhandari et al. 2020, ZeRO), divided by the ZeRO stage's sharding; activations per
layer after Korthikanti et al. 2022 ("Reducing Activation Recomputation in Large Transformer Models").
FLOPs: Narayanan et al. 2021 eq. 3, generalised to GQA / gated MLPs / MoE by counting the linear weights
a token passes through. Communication: an alpha-beta model per link class (the high-bandwidth domain or
the scale-out network) with ring collectives. Nothing here reads a cluster figure that was not sourced:
`Cluster.need` raises for a missing one.
"""

from __future__ import annotations

from dataclasses import dataclass

from .assumptions import Assumptions
from .clusters import Cluster
from .model import ModelShape

BYTES = 2  # bf16/fp16 activations, weights and gradients


@dataclass(frozen=True)
class Layout:
    tp: int = 1
    cp: int = 1          # context parallel: the sequence split over cp ranks (ring / all-gather attention)
    pp: int = 1
    dp: int = 1
    ep: int = 1          # expert parallel, inside dp (Megatron/DeepSpeed-MoE style)
    zero: int = 1        # ZeRO / FSDP stage 0..3 over dp (1 = Megatron's distributed optimizer)
    recompute: str = "selective"   # none | selective | full
    micro_batch: int = 1
    vpp: int = 1         # virtual pipeline stages per device (> 1: the interleaved 1F1B schedule)
    sp: bool = True      # sequence parallelism inside TP (Korthikanti et al. 2022)
    etp: int = 0         # expert tensor parallel (Megatron-Core --expert-tensor-parallel-size); 0 = tp
    mc2: bool = False    # Ascend MC2: each TP matmul fused with its all-gather / reduce-scatter
    last: int = 0        # layers on the last pipeline stage (it also holds the LM head); 0 = an even split

    @property
    def world(self) -> int:
        return self.tp * self.cp * self.pp * self.dp

    @property
    def expert_tp(self) -> int:
        return self.etp or self.tp

    def stage_layers(self, layers: int) -> int:
        """Layers of the fullest stage: ceil(l / p), or with a lighter last stage ceil((l - last) / (p - 1))."""
        if self.pp == 1:
            return layers
        if self.last:
            return -(-(layers - self.last) // (self.pp - 1))
        return -(-layers // self.pp)

    def label(self) -> str:
        parts = [f"TP {self.tp}"] + ([f"CP {self.cp}"] if self.cp > 1 else []) + [f"PP {self.pp}", f"DP {self.dp}"]
        return " x ".join(parts) + (f", EP {self.ep}" if self.ep > 1 else "") + \
            (f", VPP {self.vpp}" if self.vpp > 1 else "") + ("" if self.sp or self.tp == 1 else ", no SP") + \
            f", ZeRO-{self.zero}, {'no' if self.recompute == 'none' else self.recompute} recompute, " \
            f"micro-batch {self.micro_batch}" + (f", ETP {self.etp}" if self.etp and self.etp != self.tp else "") + \
            (", MC2" if self.mc2 else "") + (f", last stage {self.last} layers" if self.last else "")

    def spec(self) -> str:
        """The `--layout` spelling of this layout."""
        return (f"tp={self.tp},pp={self.pp},vpp={self.vpp},dp={self.dp},cp={self.cp},ep={self.ep},zero={self.zero},"
                f"recompute={self.recompute},sp={'on' if self.sp else 'off'},mb={self.micro_batch}"
                + (f",etp={self.etp}" if self.etp else "") + (",mc2=on" if self.mc2 else "")
                + (f",last={self.last}" if self.last else ""))


# ---- FLOPs (Narayanan et al. 2021, eq. 3)

def training_flops(model: ModelShape, batch: int, seq: int, recompute: str = "full") -> float:
    """FLOPs of one step over `batch` sequences of `seq` tokens. For a GPT with ffn = 4h and MHA this is
    96 B s l h^2 (1 + s/6h + V/16lh) with full recomputation and 72 B s l h^2 (1 + s/6h + V/12lh) without."""
    tokens = batch * seq
    linear = 2 * model.active_linear_params() * tokens      # forward matmuls of one layer
    attention = 4 * tokens * seq * model.hidden              # QK^T and AV of one layer (causal not halved)
    logits = 2 * tokens * model.hidden * model.vocab
    extra = {"none": 0.0, "selective": attention, "full": linear + attention}[recompute]
    return model.layers * (3 * (linear + attention) + extra) + 3 * logits


def narayanan_flops(batch: int, seq: int, layers: int, hidden: int, vocab: int, recompute: bool = True) -> float:
    """Narayanan et al. 2021 eq. 3 as printed (for the tests and the benchmark)."""
    s, n, h, V = seq, layers, hidden, vocab  # the paper's l is n here
    if recompute:
        return 96 * batch * s * n * h * h * (1 + s / (6 * h) + V / (16 * n * h))
    return 72 * batch * s * n * h * h * (1 + s / (6 * h) + V / (12 * n * h))


# ---- memory (bytes per device)

def activation_bytes_per_layer(model: ModelShape, seq: float, micro_batch: int, tp: int, recompute: str,
                               attention: str = "flash", value_bytes: int = BYTES, dropout: bool = False,
                               sp: bool = True, fp8_inputs: bool = False, norm_mla_recompute: bool = False) -> float:
    """Korthikanti et al. 2022: s b h (34 + 5 a s / h) without parallelism; / t with TP + sequence
    parallel; selective recomputation (or flash attention, which never stores the s x s scores) s b h 34 / t;
    full recomputation 2 s b h (the layer input only).

    The 34 counts 2-byte values and 1-byte dropout masks: attention 10 (input 2, Q 2, K 2, V 2, projection
    input 2) + mask 1, MLP (width 4h) 18 + mask 1, two norm inputs 4; the 5 a s / h is the softmax output 2,
    dropout output 2 and mask 1. Without dropout (`dropout=False`, modern LLMs) the masks and the dropout
    output go. GQA / MLA scale K and V by their width; other MLP widths scale the MLP's 16 width-sized bytes
    by width / 4h (x1.5 for a gated MLP); `value_bytes` = 4 gives the fp32 figure (masks stay 1 byte).
    Without sequence parallelism the attention and MLP inputs, the norm inputs (8) and the masks (2) are
    not divided by t: s b h (10 + 24 / t + 5 a s / (h t)) (Korthikanti eq. 2).

    `fp8_inputs` (FP8 training): the inputs only a linear layer's weight-gradient GEMM reads (QKV and fc1
    inputs, the output projection's and fc2's inputs) are kept as their 1-byte FP8 casts, as Transformer
    Engine saves them and the DeepSeek-V3 report (arXiv:2412.19437 Sec. 3.3.3) caches them.

    `norm_mla_recompute` (DeepSeek-V3 report Sec. 3.2.3: "We recompute all RMSNorm operations and MLA
    up-projections during back-propagation"): the norm outputs (the attention and MLP inputs) are not kept,
    and with MLA the per-head Q, K, V give way to the latents they are recomputed from (q_lora + kv_lora +
    the shared RoPE key)."""
    s, b, h, a = seq, micro_batch, model.hidden, model.heads
    scale = value_bytes / 2
    if recompute == "full":
        return 2 * s * b * h * scale / (tp if sp else 1)
    width = model.mlp_width_active()
    q = model.heads * model.qk_dim() / h
    kv = (model.heads if model.mla else model.kv_heads) * (model.qk_dim() + model.value_dim()) / h
    linear_in = 0.5 if fp8_inputs else 1.0  # share of a linear input's bytes kept
    if norm_mla_recompute and model.mla:
        q = kv = 0.0
        latents = 2 * (model.q_lora + model.kv_lora + model.rope_dim) / h
    else:
        latents = 0.0
    attention_values = 2 * q + 2 * kv + latents + 2 * (model.heads * model.value_dim() / h) * linear_in
    mlp_values = 16 * (width / (4 * h)) * (1.5 if model.gated_mlp else 1.0)
    fc2_input = mlp_values / (3 if model.gated_mlp else 2)  # the product (gated) or the activation's output
    mlp_values -= fc2_input * (1 - linear_in)
    masks = 2 if dropout else 0
    split = (attention_values + mlp_values) * scale / tp
    norm_outputs = 0.0 if norm_mla_recompute else 4 * linear_in  # the attention and MLP inputs
    unsplit = ((4 + norm_outputs) * scale + masks) / (tp if sp else 1)  # two norm inputs (+ their outputs)
    scores = 0.0
    if recompute == "none" and attention == "eager":
        scores = ((4 * scale + 1) if dropout else 2 * scale) * a * s / h / tp
    return s * b * h * (split + unsplit + scores)


def model_state_bytes(model: ModelShape, layout: Layout, grad_bytes: int = BYTES, copies: int = 1,
                      shard_weights: bool = False, shard_grads: bool = False) -> dict[str, float]:
    """Mixed-precision Adam: 2 (weights) + 2 or 4 (bf16 or fp32 gradients) + 12 (fp32 master, m, v) bytes
    per parameter (16 or 18; Rajbhandari et al. 2020), the parameters divided over tp x pp (experts also over
    ep); ZeRO stage 1 (Megatron's distributed optimizer) shards the 12 optimizer bytes over dp (x cp:
    context-parallel ranks hold the same weights), stage 2 also the gradients, stage 3 also the weights.
    Experts shard over dp x cp / ep. `copies` = 2 for DualPipe's two parameter copies. `shard_weights` /
    `shard_grads` keep the weights / gradients as dp slices whatever the stage (MindSpore's optimizer
    parallel, `Assumptions.optimizer_shard`)."""
    params = model.params()
    stage = layout.stage_layers(model.layers) / model.layers  # the largest stage
    dense = params["dense"] * stage / layout.tp
    experts = params["experts"] * stage / (layout.ep * layout.expert_tp)
    out = {"weights": 0.0, "gradients": 0.0, "optimizer": 0.0}
    replicas = layout.dp * layout.cp
    expert_replicas = max(1, layout.tp * replicas // (layout.ep * layout.expert_tp))
    for count, group in ((dense, replicas), (experts, expert_replicas)):
        out["weights"] += copies * 2 * count / (group if layout.zero >= 3 or shard_weights else 1)
        out["gradients"] += copies * grad_bytes * count / (group if layout.zero >= 2 or shard_grads else 1)
        out["optimizer"] += 12 * count / (group if layout.zero >= 1 else 1)
    return out


def in_flight(layout: Layout, microbatches: int, schedule: str) -> float:
    """Micro-batches whose activations the first stage holds: 1F1B min(p, m); interleaved
    p (1 + (p - 1) / (p v)) (Narayanan et al. 2021 Sec. 2.2.2); DualPipe p + 1 (DeepSeek-V3 report Table 2)."""
    p = layout.pp
    if schedule == "dualpipe" and p > 1:
        return min(p + 1, 2 * microbatches)
    held = float(min(p, microbatches))
    return held * (1 + (p - 1) / (p * layout.vpp)) if layout.vpp > 1 else held


def last_stage_in_flight(layout: Layout, microbatches: int, schedule: str) -> float:
    """Micro-batches whose activations the last stage holds: one with 1F1B (it runs each backward straight
    after its forward); interleaved ((v - 1) p + 1) chunks of 1 / v of its layers (Megatron's warm-up on the
    last rank); DualPipe is symmetric (as the first stage)."""
    if layout.pp == 1 or schedule == "dualpipe":
        return in_flight(layout, microbatches, schedule)
    if layout.vpp > 1:
        return min(((layout.vpp - 1) * layout.pp + 1) / layout.vpp, float(microbatches))
    return 1.0


def activation_bytes(model: ModelShape, layout: Layout, seq: int, microbatches: int, attention: str,
                     value_bytes: int = BYTES, dropout: bool = False, schedule: str = "1f1b",
                     fp8_inputs: bool = False, norm_mla_recompute: bool = False) -> float:
    """The fuller of the first stage (`in_flight` micro-batches of its layers) and the last stage (its
    micro-batches in flight and the fp32 logits, which only the last stage makes). Context parallelism
    holds s / cp tokens per device (flash attention only: no s x s scores)."""
    local = seq / layout.cp
    per_layer = activation_bytes_per_layer(model, local, layout.micro_batch, layout.tp, layout.recompute, attention,
                                           value_bytes, dropout, layout.sp, fp8_inputs, norm_mla_recompute)
    logits = 4 * layout.micro_batch * local * model.vocab / layout.tp
    fullest = layout.stage_layers(model.layers)
    first = fullest * in_flight(layout, microbatches, schedule) * per_layer
    if layout.pp == 1:
        return first + logits
    last_layers = layout.last or model.layers - (layout.pp - 1) * fullest
    last = max(0, last_layers) * last_stage_in_flight(layout, microbatches, schedule) * per_layer + logits
    return max(first, last)


def working_bytes(model: ModelShape, layout: Layout, seq: int, attention: str, value_bytes: int = BYTES,
                  dropout: bool = False, fp8_inputs: bool = False, norm_mla_recompute: bool = False) -> float:
    """Backward working set: while a layer's backward runs, the gradients of its saved activations exist
    next to the stored ones, about one more layer's activations (with full recomputation, the recomputed
    layer's activations without recomputation, Korthikanti et al. 2022 section 5)."""
    mode = "none" if layout.recompute == "full" else layout.recompute
    return activation_bytes_per_layer(model, seq / layout.cp, layout.micro_batch, layout.tp, mode, attention,
                                      value_bytes, dropout, layout.sp, fp8_inputs, norm_mla_recompute)


# ---- collectives (alpha-beta, ring)

def all_reduce_s(nbytes: float, n: int, gbps: float, a: Assumptions) -> float:
    if n <= 1:
        return 0.0
    return 2 * (n - 1) * a.latency_s + 2 * (n - 1) / n * nbytes / (gbps * 1e9 * a.link_efficiency)


def all_gather_s(nbytes: float, n: int, gbps: float, a: Assumptions) -> float:
    """Also reduce-scatter: (n-1)/n of the full buffer crosses each device's link."""
    if n <= 1:
        return 0.0
    return (n - 1) * a.latency_s + (n - 1) / n * nbytes / (gbps * 1e9 * a.link_efficiency)


def all_to_all_s(nbytes: float, n: int, gbps: float, a: Assumptions) -> float:
    """Each device sends (n-1)/n of its buffer to the others (pairwise exchange)."""
    return all_gather_s(nbytes, n, gbps, a)


def p2p_s(nbytes: float, gbps: float, a: Assumptions) -> float:
    return a.latency_s + nbytes / (gbps * 1e9 * a.link_efficiency)


def group_spans(layout: Layout) -> dict[str, int]:
    """Rank order tp (innermost), cp, ep, the rest of dp, pp (outermost): the device span of each group
    (the gradient all-reduce group is dp x cp)."""
    inner = layout.tp * layout.cp
    return {"tp": layout.tp, "cp": inner, "ep": inner * layout.ep, "dp": inner * layout.dp, "pp": layout.world}


def link_of(span: int, cluster: Cluster, world: int) -> str:
    """Ranks fill domains in order; a group's members sit in one block of `span` consecutive ranks. The
    group uses the domain's links when every such block of the job lies inside one domain."""
    domain = int(cluster.need("domain_size"))
    if span <= domain and domain % span == 0:  # blocks start at multiples of span, so none crosses a boundary
        return "domain"
    inside = all(start // domain == (start + span - 1) // domain for start in range(0, world, span))
    return "domain" if inside else "scale-out"


def link_gbps(link: str, cluster: Cluster) -> float:
    return cluster.need("domain_GBps" if link == "domain" else "scale_out_GBps")
