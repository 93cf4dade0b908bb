"""One layout's step on one cluster: compute by part, each collective (exposed and overlapped) on its link,
the pipeline bubble of its schedule, memory by kind; and the constraints a given layout can break."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from . import calibration, cost
from .assumptions import Assumptions
from .clusters import Cluster
from .compute import Device, microbatch_s
from .cost import BYTES, Layout
from .model import ModelShape


@dataclass(frozen=True)
class Estimate:
    layout: Layout
    step_s: float
    compute_s: float
    bubble_s: float
    comm_s: dict[str, float]            # exposed seconds per collective ("tp all-gather/reduce-scatter", ...)
    links: dict[str, str]               # group -> "domain" | "scale-out"
    memory: dict[str, float]            # bytes per device
    fits: bool
    achieved_tflops: float              # hardware FLOPs (with recomputation) per device per second
    mfu: float                          # model FLOPs (no recomputation) / peak
    microbatches: int
    notes: tuple[str, ...] = ()
    overlapped_s: dict[str, float] = field(default_factory=dict)  # hidden behind compute, per collective
    compute_parts: dict[str, float] = field(default_factory=dict)  # gemm / experts / attention / element-wise
    schedule: str = "1f1b"
    comm_links: dict[str, str] = field(default_factory=dict)  # collective -> the link it runs on

    @property
    def comm_share(self) -> float:
        return sum(self.comm_s.values()) / self.step_s if self.step_s else 0.0

    @property
    def bubble(self) -> float:
        return self.bubble_s / self.step_s if self.step_s else 0.0

    def terms(self) -> dict[str, float]:
        """The step as a sum: compute parts, bubble, each exposed collective."""
        return {**self.compute_parts, "pipeline bubble": self.bubble_s, **self.comm_s}

    def to_json(self) -> dict[str, Any]:
        lay = self.layout
        return {
            "layout": {"tp": lay.tp, "cp": lay.cp, "pp": lay.pp, "dp": lay.dp, "ep": lay.ep, "zero": lay.zero,
                       "recompute": lay.recompute, "micro_batch": lay.micro_batch, "vpp": lay.vpp, "sp": lay.sp,
                       "world": lay.world},
            "label": lay.label(), "spec": lay.spec(), "schedule": self.schedule, "step_s": self.step_s,
            "compute_s": self.compute_s, "compute_parts_s": self.compute_parts, "bubble_s": self.bubble_s,
            "bubble": self.bubble, "comm_s": self.comm_s, "overlapped_comm_s": self.overlapped_s,
            "comm_links": self.comm_links, "comm_share": self.comm_share, "links": self.links,
            "memory_bytes": self.memory, "fits": self.fits, "achieved_tflops": self.achieved_tflops,
            "mfu": self.mfu, "microbatches": self.microbatches, "notes": list(self.notes),
        }


@dataclass(frozen=True)
class Job:
    model: ModelShape
    global_batch: int
    seq: int
    dtype: str = "bf16"
    assumptions: Assumptions = field(default_factory=Assumptions)


def on_cluster(job: Job, cluster: Cluster, assumed: frozenset[str] = frozenset()) -> Job:
    """The job with the cluster's own (calibrated) efficiencies and its hardware family's fitted MoE dispatch
    time in place of the global assumptions; a key the user set with --assume (`assumed`) keeps the user's
    value."""
    family = {"moe_dispatch_s": calibration.MOE_DISPATCH_S["ascend" if cluster.ascend else "nvidia"][0]}
    own: dict[str, Any] = {k: v for k, v in {**family, **cluster.efficiencies()}.items() if k not in assumed}
    return replace(job, assumptions=replace(job.assumptions, **own)) if own else job


def schedule_of(layout: Layout, a: Assumptions) -> str:
    if layout.pp == 1:
        return "none"
    return "interleaved" if layout.vpp > 1 else a.schedule


def bubble_fraction(layout: Layout, microbatches: int, schedule: str) -> float:
    """Idle share relative to the pipelined work: 1F1B (p-1)/m, interleaved (p-1)/(m v) (Narayanan et al.
    2021), ZB-H1 a third of 1F1B (Qi et al. 2023), DualPipe (p/2-1)(F&B+B-3W)/(m (F+B)) with B = 2F,
    W = F: (p/2-1) 2 / (3 m) (DeepSeek-V3 report Table 2)."""
    p, m = layout.pp, microbatches
    if p == 1 or m == 0:
        return 0.0
    return {"1f1b": (p - 1) / m, "interleaved": (p - 1) / (m * layout.vpp), "zero-bubble": (p - 1) / (3 * m),
            "dualpipe": max(0.0, p / 2 - 1) * 2 / (3 * m)}.get(schedule, (p - 1) / m)


def _ep_all_to_all_s(model: ModelShape, lay: Layout, tokens: float, cluster: Cluster, link: str,
                     a: Assumptions) -> float:
    """Dispatch or combine of one MoE layer: each device sends its tokens x top-k hidden vectors. Across
    domains with node/domain-limited routing a token crosses the scale-out link once per target domain
    (at most `moe_domains`) and fans out inside it (DeepSeek-V3 report Sec. 3.2.2)."""
    volume = tokens * model.top_k * model.hidden * BYTES * a.capacity_factor  # padded to the expert capacity
    if link == "domain":
        return cost.all_to_all_s(volume, lay.ep, cost.link_gbps("domain", cluster), a)
    domain = int(cluster.need("domain_size"))
    span = cost.group_spans(lay)["ep"]
    domains = -(-span // domain)
    domains = domains if domains > 1 else lay.ep  # forced across (explain): every peer in another domain
    per_token = min(model.top_k, a.moe_domains) if a.moe_domains else model.top_k
    across = tokens * per_token * model.hidden * BYTES * a.capacity_factor * (domains - 1) / domains
    return max(across / (cost.link_gbps("scale-out", cluster) * 1e9 * a.link_efficiency),
               cost.all_to_all_s(volume, lay.ep, cost.link_gbps("domain", cluster), a) if span > 1 else 0.0)


TP_MC2 = "tp all-gather/reduce-scatter (MC2 fused)"
ETP_GATHER = "etp all-gather/reduce-scatter (routed tokens)"


def _etp_gather_s(model: ModelShape, lay: Layout, local: float, cluster: Cluster, link: str, a: Assumptions) -> float:
    """One all-gather (dispatch) or reduce-scatter (combine) of the routed tokens over the expert-TP group: after
    the all-to-all each rank holds the top-k copies of its own share of the tokens; the expert shards need
    all of them (Megatron-Core's all-to-all dispatcher gathers them over the TP group and reduce-scatters the
    expert output back; DeepSpeed-MoE, Rajbhandari et al. 2022 Sec. 5, drops the TP duplicates before the
    all-to-all and all-gathers after). Without sequence parallelism each rank already has every token and
    the partial expert outputs are all-reduced instead: the same bytes."""
    rows = lay.micro_batch * local * lay.expert_tp / lay.tp * model.top_k * a.capacity_factor * a.moe_imbalance
    return cost.all_gather_s(rows * model.hidden * BYTES, lay.expert_tp, cost.link_gbps(link, cluster), a)


@dataclass
class _Collectives:  # built up by one function, then read
    """Per micro-batch seconds of each collective before overlap, the share hidden, and its link."""
    raw: dict[str, float] = field(default_factory=dict)
    hide: dict[str, float] = field(default_factory=dict)
    via: dict[str, str] = field(default_factory=dict)

    def add(self, name: str, seconds: float, hidden: float, link: str) -> None:
        self.raw[name] = seconds
        self.hide[name] = hidden
        self.via[name] = link


def _microbatch_collectives(job: Job, cluster: Cluster, lay: Layout, links: dict[str, str],
                            schedule: str) -> _Collectives:
    """The tp, ep, cp and pp collectives of one micro-batch on this rank's layers."""
    m_, a, s = job.model, job.assumptions, job.seq
    bw = {g: cost.link_gbps(link, cluster) for g, link in links.items()}
    layers_here = lay.stage_layers(m_.layers)
    moe_here = layers_here * (m_.moe_layers / m_.layers if m_.moe else 0.0)
    local = s / lay.cp
    act = lay.micro_batch * local * m_.hidden * BYTES      # one layer's [s, b, h] activation
    full = lay.recompute == "full"
    out = _Collectives()
    if lay.tp > 1:  # per layer 2 all-gathers + 2 reduce-scatters (SP) or 2 all-reduces, forward and backward
        calls = (4 if lay.sp else 2) * (2 + (1 if full else 0))
        one = cost.all_gather_s(act, lay.tp, bw["tp"], a) if lay.sp else cost.all_reduce_s(act, lay.tp, bw["tp"], a)
        out.add(TP_MC2 if lay.mc2 else "tp all-gather/reduce-scatter", calls * layers_here * one, a.tp_overlap,
                links["tp"])
    if lay.ep > 1 and m_.moe:  # dispatch + combine, forward and backward (and the recomputed forward)
        calls = 4 + (2 if full else 0)
        tokens = lay.micro_batch * local / (lay.tp if lay.sp else 1)
        out.add("ep all-to-all", calls * moe_here * _ep_all_to_all_s(m_, lay, tokens, cluster, links["ep"], a),
                1.0 if schedule == "dualpipe" else a.ep_overlap, links["ep"])
        if lay.expert_tp > 1:
            link = cost.link_of(lay.expert_tp, cluster, lay.world)
            out.add(ETP_GATHER, calls * moe_here * _etp_gather_s(m_, lay, local, cluster, link, a), a.tp_overlap, link)
    if lay.cp > 1 and a.cp_comm == "ulysses":  # all-to-all Q, K, V in and the output back, each way (DeepSpeed-Ulysses)
        kv_heads = m_.heads if m_.mla else m_.kv_heads
        width = m_.heads * (m_.qk_dim() + m_.value_dim()) + kv_heads * (m_.qk_dim() + m_.value_dim())
        moved = lay.micro_batch * local * width * BYTES / lay.tp  # this rank's s / cp tokens, all heads of its TP shard
        calls = 2 + (1 if full else 0)
        out.add("cp all-to-all (Ulysses)", calls * layers_here * cost.all_to_all_s(moved, lay.cp, bw["cp"], a), 0.0,
                links["cp"])
    elif lay.cp > 1:  # all-gather K and V forward; backward all-gathers again and reduce-scatters dK, dV
        kv_heads = m_.heads if m_.mla else m_.kv_heads
        kv = lay.micro_batch * s * kv_heads * (m_.qk_dim() + m_.value_dim()) * BYTES / lay.tp
        calls = 3 + (1 if full else 0)
        out.add("cp all-gather K/V", calls * layers_here * cost.all_gather_s(kv, lay.cp, bw["cp"], a), 0.0,
                links["cp"])
    if lay.pp > 1:
        out.add("pp send/recv", 2 * lay.vpp * cost.p2p_s(act / (lay.tp if lay.sp else 1), bw["pp"], a),
                a.pp_overlap, links["pp"])
    return out


def _memory(job: Job, lay: Layout, micro: int, schedule: str) -> dict[str, float]:
    """Bytes per device by kind, and their total."""
    m_, a = job.model, job.assumptions
    copies = 2 if schedule == "dualpipe" else 1
    mindspore = a.optimizer_shard.startswith("mindspore")
    accumulated = micro > 1 or lay.pp > 1  # MindSpore keeps a full accumulated-gradient buffer unless told
    memory = cost.model_state_bytes(m_, lay, a.grad_bytes, copies, shard_weights=mindspore,
                                    shard_grads=a.optimizer_shard == "mindspore+grads" or (mindspore and not accumulated))
    fp8, light = job.dtype == "fp8", a.norm_mla_recompute == "on"
    memory["activations"] = cost.activation_bytes(m_, lay, job.seq, micro, a.attention, dropout=a.dropout > 0,
                                                  schedule=schedule, fp8_inputs=fp8, norm_mla_recompute=light)
    memory["backward working set"] = cost.working_bytes(m_, lay, job.seq, a.attention, dropout=a.dropout > 0,
                                                        fp8_inputs=fp8, norm_mla_recompute=light)
    memory["total"] = sum(memory.values())
    return memory


def device_of(job: Job, cluster: Cluster) -> Device:
    """The matmul rates and HBM bandwidth a step runs at: FP8 GEMMs where they pay, the rest at the BF16 peak."""
    hbm = cluster.need("hbm_GBps") * 1e9
    if job.dtype == "fp8":
        return Device(cluster.peak_tflops("bf16") * 1e12, hbm, cluster.peak_tflops("fp8") * 1e12)
    return Device(cluster.peak_tflops(job.dtype) * 1e12, hbm)


def estimate(job: Job, cluster: Cluster, layout: Layout, force_links: dict[str, str] | None = None) -> Estimate:
    m_, a = job.model, job.assumptions
    lay, s = layout, job.seq
    peak = cluster.peak_tflops(job.dtype) * 1e12
    dev = device_of(job, cluster)
    micro = job.global_batch // (lay.dp * lay.micro_batch)
    links = {g: cost.link_of(span, cluster, lay.world) for g, span in cost.group_spans(lay).items()}
    links.update(force_links or {})
    schedule = schedule_of(lay, a)

    parts = microbatch_s(m_, lay, s, dev, a)
    per_mb = sum(parts.values())
    comm = _microbatch_collectives(job, cluster, lay, links, schedule)
    if TP_MC2 in comm.raw and comm.raw[TP_MC2]:  # hidden inside the fused matmuls (not the MoE experts)
        fused = parts["gemm"] + parts.get("fp8 quantize", 0.0)
        comm.hide[TP_MC2] = max(comm.hide[TP_MC2], min(a.mc2_overlap * comm.raw[TP_MC2], fused) / comm.raw[TP_MC2])
    via = comm.via
    exposed = {k: v * (1 - comm.hide[k]) * micro for k, v in comm.raw.items()}
    overlapped = {k: v * comm.hide[k] * micro for k, v in comm.raw.items()}
    # compute running beside a hidden micro-batch collective loses the compute units the collective occupies
    contention = a.comm_sm_share * sum(overlapped.values())
    pipe_s = micro * per_mb + sum(exposed.values()) + contention
    bubble_s = bubble_fraction(lay, micro, schedule) * pipe_s
    if lay.dp * lay.cp > 1:
        dp_s, window = _dp_s(m_, lay, micro, per_mb, cost.link_gbps(links["dp"], cluster), a)
        hidden = min(dp_s, window)
        exposed["dp gradient reduce"] = dp_s - hidden
        overlapped["dp gradient reduce"] = hidden
        via["dp gradient reduce"] = links["dp"]
    step_s = pipe_s + bubble_s + exposed.get("dp gradient reduce", 0.0)

    memory = _memory(job, lay, micro, schedule)
    fits = memory["total"] <= cluster.need("hbm_GB") * 1e9 * a.memory_headroom
    hw_flops = cost.training_flops(m_, job.global_batch, s, lay.recompute)
    model_flops = cost.training_flops(m_, job.global_batch, s, "none")
    compute_parts = {f"compute: {k}": v * micro for k, v in parts.items() if v}
    if contention:
        compute_parts["compute: units lent to overlapped collectives"] = contention
    return Estimate(lay, step_s, micro * per_mb, bubble_s, exposed, links, memory, fits,
                    hw_flops / lay.world / step_s / 1e12, model_flops / lay.world / step_s / peak, micro,
                    overlapped_s=overlapped, compute_parts=compute_parts, schedule=schedule, comm_links=via)


def _dp_s(m_: ModelShape, lay: Layout, micro: int, per_mb: float, gbps: float, a: Assumptions) -> tuple[float, float]:
    """Data-parallel traffic per step and the compute window that can hide it. ZeRO 0-2: one gradient
    reduce(-scatter) + parameter all-gather per step (the bytes of one all-reduce), hidden behind the last
    micro-batch's backward and, with a sharded optimizer, the next forward (dp_overlap of one micro-batch).
    ZeRO-3 / FSDP: all-gather forward and backward + reduce-scatter for every micro-batch, each hidden behind
    that micro-batch."""
    params = m_.params()
    dense = params["dense"] / (lay.tp * lay.pp) * BYTES
    experts = params["experts"] / (lay.expert_tp * lay.pp * lay.ep) * BYTES
    replicas = lay.dp * lay.cp
    expert_replicas = max(1, lay.tp * replicas // (lay.expert_tp * lay.ep))
    ring = cost.all_reduce_s(dense, replicas, gbps, a) + cost.all_reduce_s(experts, expert_replicas, gbps, a)
    if lay.zero >= 3:
        return 1.5 * ring * micro, a.dp_overlap * per_mb * micro
    # an all-reduce of the gradients (ZeRO-0), or a reduce-scatter of them + an all-gather of bf16 weights
    grads = ring * a.grad_bytes / BYTES if lay.zero == 0 else ring * (a.grad_bytes / BYTES + 1) / 2
    return grads, a.dp_overlap * per_mb


def _model_split_problems(job: Job, lay: Layout) -> list[str]:
    """Where the model's heads, experts or layers do not split over tp, ep, pp and vpp."""
    m, out = job.model, []
    if m.heads % lay.tp:
        out.append(f"tp: {m.heads} attention heads are not divisible by tp {lay.tp}")
    if not m.mla and m.kv_heads % lay.tp:
        out.append(f"tp: {m.kv_heads} KV heads are not divisible by tp {lay.tp}")
    if lay.ep > 1 and not m.moe:
        out.append(f"ep: ep {lay.ep} on a dense model (no experts)")
    if m.moe and m.experts % lay.ep:
        out.append(f"ep: {m.experts} experts are not divisible by ep {lay.ep}")
    if lay.ep > 1 and (lay.dp * lay.cp) % lay.ep:
        out.append(f"ep: ep {lay.ep} does not divide dp x cp = {lay.dp * lay.cp}")
    if lay.pp * lay.vpp > m.layers:
        out.append(f"pp: pp x vpp = {lay.pp * lay.vpp} is more than the {m.layers} layers")
    if lay.vpp > 1 and lay.pp == 1:
        out.append("vpp: virtual pipeline stages need pp > 1")
    if lay.etp and (not m.moe or lay.tp * lay.dp * lay.cp % (lay.etp * lay.ep) or lay.etp > lay.tp * lay.cp):
        out.append(f"etp: expert tensor parallel {lay.etp} needs an MoE model and etp x ep = {lay.etp * lay.ep} "
                   f"dividing tp x dp x cp = {lay.tp * lay.dp * lay.cp}")
    if lay.last and (lay.pp == 1 or lay.last > lay.stage_layers(m.layers) or lay.last > m.layers - (lay.pp - 1)):
        out.append(f"last: {lay.last} layers on the last stage needs pp > 1 and no more than the other stages hold")
    return out


def _data_split_problems(job: Job, lay: Layout) -> list[str]:
    """Where the batch or the sequence does not split over dp x micro-batch and cp."""
    out = []
    if job.global_batch % (lay.dp * lay.micro_batch):
        out.append(f"batch: global batch {job.global_batch} is not divisible by dp x micro-batch = "
                   f"{lay.dp * lay.micro_batch}")
    if lay.cp > 1 and job.seq % (2 * lay.cp):
        out.append(f"cp: sequence {job.seq} is not divisible by 2 x cp = {2 * lay.cp} (load-balanced causal chunks)")
    if lay.cp > 1 and job.assumptions.attention != "flash":
        out.append("cp: context parallelism needs flash attention (attention=eager keeps the s x s scores)")
    if lay.cp > 1 and job.assumptions.cp_comm == "ulysses" and (job.model.heads // lay.tp) % lay.cp:
        out.append(f"cp: Ulysses splits the {job.model.heads // lay.tp} heads per TP rank over cp {lay.cp}: "
                   "not divisible")
    return out


def _memory_problem(job: Job, cluster: Cluster, est: Estimate) -> str:
    hbm = cluster.need("hbm_GB")
    mem = est.memory
    return (f"memory: needs {mem['total'] / 1e9:.1f} GB per device (weights {mem['weights'] / 1e9:.1f}, "
            f"gradients {mem['gradients'] / 1e9:.1f}, optimizer {mem['optimizer'] / 1e9:.1f}, activations "
            f"{mem['activations'] / 1e9:.1f}, working set {mem['backward working set'] / 1e9:.1f}); HBM "
            f"{hbm:.0f} GB x headroom {job.assumptions.memory_headroom:.0%} = "
            f"{hbm * job.assumptions.memory_headroom:.1f} GB")


def layout_problems(job: Job, cluster: Cluster, layout: Layout, devices: int | None = None) -> list[str]:
    """What makes a given layout impossible, each naming its constraint (empty: it can run)."""
    lay = layout
    out = []
    if devices and lay.world != devices:
        out.append(f"world size: tp x cp x pp x dp = {lay.world}, not the {devices} devices asked for")
    out += _model_split_problems(job, lay)
    out += _data_split_problems(job, lay)
    if lay.mc2 and (lay.tp == 1 or not cluster.ascend):
        out.append(f"mc2: MC2 fuses TP matmuls with their collectives on Ascend: needs tp > 1 and an Ascend cluster "
                   f"({cluster.name} is {'Ascend' if cluster.ascend else 'not Ascend'}, tp {lay.tp})")
    if lay.world > int(cluster.figure("devices").value or lay.world) and not devices:
        out.append(f"world size: {lay.world} devices, the cluster has {int(cluster.need('devices'))} "
                   "(give --devices)")
    if out:
        return out
    est = estimate(job, cluster, lay)
    return [] if est.fits else [_memory_problem(job, cluster, est)]
