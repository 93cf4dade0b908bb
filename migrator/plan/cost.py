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

from dataclasses import asdict, dataclass

from .clusters import Cluster
from .model import ModelShape

BYTES = 2  # bf16/fp16 activations, weights and gradients


@dataclass(frozen=True)
class Assumptions:
    """Global efficiency assumptions: the same for every model, layout and cluster (docs/plan.md)."""

    gemm_efficiency: float = 0.65     # achieved / peak dense TFLOP/s of the matrix multiplies
    nongemm_passes: float = 1.0       # HBM passes over a layer's activation bytes per forward-equivalent
    link_efficiency: float = 0.8      # achieved / nominal link bandwidth of a ring collective
    latency_s: float = 0.0            # alpha per collective step: no sourced figure, so 0 (bandwidth only)
    dp_overlap: float = 0.0           # share of the data-parallel gradient traffic hidden behind backward
    memory_headroom: float = 0.9      # share of HBM the plan may fill (allocator, workspace, fragmentation)
    attention: str = "flash"          # "flash": no s x s scores kept or re-read; "eager": Korthikanti's 5as/h term
    cp_min_tokens: int = 4096         # context parallelism only down to this many tokens per device: the GEMM
                                      # efficiency above is a constant and would flatter ever-smaller GEMMs

    def to_json(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class Layout:
    tp: int = 1
    cp: int = 1          # context parallel: the sequence split over cp ranks (ring / all-gather attention)
    pp: int = 1
    dp: int = 1
    ep: int = 1          # expert parallel, inside dp (Megatron/DeepSpeed-MoE style)
    zero: int = 1        # ZeRO / FSDP stage 0..3 over dp
    recompute: str = "selective"   # none | selective | full
    micro_batch: int = 1

    @property
    def world(self) -> int:
        return self.tp * self.cp * self.pp * self.dp

    def label(self) -> str:
        parts = [f"TP {self.tp}"] + ([f"CP {self.cp}"] if self.cp > 1 else []) + [f"PP {self.pp}", f"DP {self.dp}"]
        return " x ".join(parts) + (f", EP {self.ep}" if self.ep > 1 else "") + \
            f", ZeRO-{self.zero}, {'no' if self.recompute == 'none' else self.recompute} recompute, " \
            f"micro-batch {self.micro_batch}"


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
                               attention: str = "flash", value_bytes: int = BYTES) -> float:
    """Korthikanti et al. 2022: s b h (34 + 5 a s / h) without parallelism; / t with TP + sequence parallel;
    selective recomputation (or flash attention, which never stores the s x s scores) s b h 34 / t; full
    recomputation 2 s b h (the layer input only).

    The 34 counts 2-byte values and 1-byte dropout masks: attention 10 + mask 1, MLP (width 4h) 18 + mask 1,
    two norm inputs 4; the 5 a s / h is 4 (softmax output, dropout output) + 1 (mask). Other MLP widths scale
    the MLP's 16 width-sized bytes by width / 4h (x1.5 for a gated MLP, one more width-sized tensor);
    `value_bytes` = 4 gives the fp32 figure (masks stay 1 byte)."""
    s, b, h, a = seq, micro_batch, model.hidden, model.heads
    scale = value_bytes / 2
    if recompute == "full":
        return 2 * s * b * h * scale
    width = model.mlp_width_active()
    mlp_values = 2 + 16 * (width / (4 * h)) * (1.5 if model.gated_mlp else 1.0)
    per_token = (10 + mlp_values + 4) * scale + 2          # + the two h-wide dropout masks
    scores = (4 * scale + 1) * a * s / h if (recompute == "none" and attention == "eager") else 0.0
    return s * b * h * (per_token + scores) / tp


def model_state_bytes(model: ModelShape, layout: Layout) -> dict[str, float]:
    """Mixed-precision Adam: 2 (weights) + 2 (gradients) + 12 (fp32 master, m, v) bytes per parameter,
    the parameters divided over tp x pp (experts also over ep); ZeRO stage 1 shards the 12 optimizer
    bytes over dp (x cp: context-parallel ranks hold the same weights), stage 2 also the gradients,
    stage 3 also the weights. Experts shard over dp x cp / ep."""
    params = model.params()
    per_stage = -(-model.layers // layout.pp) / model.layers / layout.tp  # the largest stage
    dense = params["dense"] * per_stage
    experts = params["experts"] * per_stage / layout.ep
    out = {"weights": 0.0, "gradients": 0.0, "optimizer": 0.0}
    replicas = layout.dp * layout.cp
    for count, group in ((dense, replicas), (experts, max(1, replicas // layout.ep))):
        out["weights"] += 2 * count / (group if layout.zero >= 3 else 1)
        out["gradients"] += 2 * count / (group if layout.zero >= 2 else 1)
        out["optimizer"] += 12 * count / (group if layout.zero >= 1 else 1)
    return out


def activation_bytes(model: ModelShape, layout: Layout, seq: int, microbatches: int, attention: str,
                     value_bytes: int = BYTES) -> float:
    """1F1B: the first stage holds min(pp, m) microbatches of its l / pp layers (+ the fp32 logits).
    Context parallelism holds s / cp tokens per device (flash attention only: no s x s scores)."""
    local = seq / layout.cp
    per_layer = activation_bytes_per_layer(model, local, layout.micro_batch, layout.tp, layout.recompute, attention,
                                           value_bytes)
    in_flight = min(layout.pp, microbatches)
    logits = 4 * layout.micro_batch * local * model.vocab / layout.tp
    return -(-model.layers // layout.pp) * in_flight * per_layer + logits


def working_bytes(model: ModelShape, layout: Layout, seq: int, attention: str, value_bytes: int = BYTES) -> float:
    """Backward working set: while a layer's backward runs, the gradients of its saved activations exist
    next to the stored ones, about one more layer's activations (with full recomputation, the recomputed
    layer's activations without recomputation, Korthikanti et al. 2022 section 5)."""
    mode = "none" if layout.recompute == "full" else layout.recompute
    return activation_bytes_per_layer(model, seq / layout.cp, layout.micro_batch, layout.tp, mode, attention,
                                      value_bytes)


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
    inside = all(start // domain == (start + span - 1) // domain for start in range(0, world, span))
    return "domain" if inside else "scale-out"


def link_gbps(link: str, cluster: Cluster) -> float:
    return cluster.need("domain_GBps" if link == "domain" else "scale_out_GBps")
