"""Estimate one layout's step, enumerate the valid layouts, rank them by step time, say why the best wins."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from . import cost
from .clusters import Cluster, MissingFigure
from .cost import BYTES, Assumptions, Layout
from .model import ModelShape

RECOMPUTE = ("none", "selective", "full")


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

    @property
    def comm_share(self) -> float:
        return sum(self.comm_s.values()) / self.step_s if self.step_s else 0.0

    @property
    def bubble(self) -> float:
        return self.bubble_s / self.step_s if self.step_s else 0.0

    def to_json(self) -> dict[str, Any]:
        lay = self.layout
        return {
            "layout": {"tp": lay.tp, "cp": lay.cp, "pp": lay.pp, "dp": lay.dp, "ep": lay.ep, "zero": lay.zero,
                       "recompute": lay.recompute, "micro_batch": lay.micro_batch, "world": lay.world},
            "label": lay.label(), "step_s": self.step_s, "compute_s": self.compute_s, "bubble_s": self.bubble_s,
            "bubble": self.bubble, "comm_s": self.comm_s, "comm_share": self.comm_share, "links": self.links,
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


def estimate(job: Job, cluster: Cluster, layout: Layout, force_links: dict[str, str] | None = None) -> Estimate:
    m_, a = job.model, job.assumptions
    lay, s = layout, job.seq
    peak = cluster.peak_tflops(job.dtype) * 1e12
    micro = job.global_batch // (lay.dp * lay.micro_batch)
    links = {g: cost.link_of(span, cluster, lay.world) for g, span in cost.group_spans(lay).items()}
    links.update(force_links or {})
    bw = {g: cost.link_gbps(link, cluster) for g, link in links.items()}

    hw_flops = cost.training_flops(m_, job.global_batch, s, lay.recompute)
    model_flops = cost.training_flops(m_, job.global_batch, s, "none")
    gemm_s = hw_flops / lay.world / (peak * a.gemm_efficiency)
    # memory-bound element-wise work: passes over each layer's activation bytes (forward, 2x backward, recompute)
    local = s / lay.cp  # tokens per device of each sequence
    traffic = cost.activation_bytes_per_layer(m_, local, lay.micro_batch, lay.tp, "none", a.attention)
    passes = 3 + {"none": 0.0, "selective": 0.0, "full": 1.0}[lay.recompute]
    stage_share = -(-m_.layers // lay.pp) * lay.pp / m_.layers  # >1 when the stages are uneven
    gemm_s *= stage_share
    nongemm_s = a.nongemm_passes * passes * traffic * micro * -(-m_.layers // lay.pp) / cluster.need("hbm_GBps") / 1e9
    compute_s = gemm_s + nongemm_s

    layers_here = -(-m_.layers // lay.pp)  # uneven stages: the slowest holds ceil(l / pp) layers
    act = lay.micro_batch * local * m_.hidden * BYTES      # one layer's [s, b, h] activation
    comm: dict[str, float] = {}
    if lay.tp > 1:  # sequence parallel: 2 all-gathers + 2 reduce-scatters per layer forward (and backward)
        per_layer = (4 + (4 if lay.recompute == "full" else 0)) * 2
        comm["tp all-gather/reduce-scatter"] = per_layer * micro * layers_here * \
            cost.all_gather_s(act, lay.tp, bw["tp"], a)
    if lay.ep > 1 and m_.moe:  # dispatch + combine, forward and backward (and the recomputed forward)
        calls = 4 + (2 if lay.recompute == "full" else 0)
        tokens = lay.micro_batch * local / lay.tp
        comm["ep all-to-all"] = calls * micro * layers_here * \
            cost.all_to_all_s(tokens * m_.top_k * m_.hidden * BYTES, lay.ep, bw["ep"], a)
    if lay.cp > 1:  # all-gather K and V forward; backward all-gathers again and reduce-scatters dK, dV
        kv = lay.micro_batch * s * 2 * m_.kv_heads * m_.head_dim * BYTES / lay.tp
        calls = 3 + (1 if lay.recompute == "full" else 0)
        comm["cp all-gather K/V"] = calls * micro * layers_here * cost.all_gather_s(kv, lay.cp, bw["cp"], a)
    if lay.pp > 1:
        comm["pp send/recv"] = 2 * micro * cost.p2p_s(act / lay.tp, bw["pp"], a)
    pipe_s = compute_s + sum(comm.values())
    bubble_s = (lay.pp - 1) / micro * pipe_s
    if lay.dp * lay.cp > 1:
        params = m_.params()
        dense_grad = params["dense"] / (lay.tp * lay.pp) * BYTES
        expert_grad = params["experts"] / (lay.tp * lay.pp * lay.ep) * BYTES
        factor = 1.5 if lay.zero >= 3 else 1.0  # ZeRO-3 also all-gathers the weights (fwd + bwd)
        replicas = lay.dp * lay.cp
        dp_s = factor * (cost.all_reduce_s(dense_grad, replicas, bw["dp"], a)
                         + cost.all_reduce_s(expert_grad, max(1, replicas // lay.ep), bw["dp"], a))
        comm["dp gradient all-reduce"] = dp_s * (1 - a.dp_overlap)
    step_s = pipe_s + bubble_s + comm.get("dp gradient all-reduce", 0.0)

    memory = cost.model_state_bytes(m_, lay)
    memory["activations"] = cost.activation_bytes(m_, lay, s, micro, a.attention)
    memory["backward working set"] = cost.working_bytes(m_, lay, s, a.attention)
    memory["total"] = sum(memory.values())
    fits = memory["total"] <= cluster.need("hbm_GB") * 1e9 * a.memory_headroom
    return Estimate(lay, step_s, compute_s, bubble_s, comm, links, memory, fits,
                    hw_flops / lay.world / step_s / 1e12, model_flops / lay.world / step_s / peak, micro)


def _divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


def layouts(job: Job, world: int, tp_max: int | None = None) -> list[Layout]:
    """Every layout that divides: tp | heads and kv-heads (and <= the domain when asked), 2 cp | seq
    (load-balanced causal chunks, cp <= 16, at least `cp_min_tokens` per device, flash attention only),
    pp <= layers (uneven stages allowed),
    dp | global batch, ep | experts and dp, micro-batch | batch per replica."""
    m = job.model
    out = []
    a = job.assumptions
    cps = [c for c in _divisors(world) if c == 1 or (c <= 16 and job.seq % (2 * c) == 0
                                                     and job.seq // c >= a.cp_min_tokens)] \
        if a.attention == "flash" else [1]
    for tp in _divisors(world):
        if m.heads % tp or m.kv_heads % tp or (tp_max and tp > tp_max):
            continue
        for cp in (c for c in cps if (world // tp) % c == 0):
            for pp in _divisors(world // (tp * cp)):
                dp = world // (tp * cp * pp)
                if pp > m.layers or job.global_batch % dp:
                    continue
                eps = [e for e in _divisors(dp) if m.experts % e == 0] if m.moe else [1]
                per_replica = job.global_batch // dp
                for ep in eps:
                    for zero in (1, 3) if dp * cp > 1 else (0,):
                        for rc in RECOMPUTE:
                            for mb in (1, 2, 4):
                                if per_replica % mb == 0:
                                    out.append(Layout(tp, cp, pp, dp, ep, zero, rc, mb))
    return out


def search(job: Job, cluster: Cluster, world: int | None = None, top: int = 5) -> dict[str, Any]:
    world = world or int(cluster.need("devices"))
    required = ["domain_size", "domain_GBps", "hbm_GB", "hbm_GBps", f"peak_tflops_{job.dtype}"]
    domain = cluster.figure("domain_size").value
    if domain is None or world > domain:
        required.append("scale_out_GBps")
    missing = [k for k in required if cluster.figure(k).value is None]
    if missing:  # name every missing figure at once
        raise MissingFigure(
            f"cluster {cluster.name!r}: no sourced value for {', '.join(missing)} (" +
            "; ".join(f"{k}: {cluster.figure(k).source}" for k in missing) + "); required inputs: set them in "
            f"pyproject.toml under [tool.migrate.clusters.{cluster.name}]")
    candidates: list[Estimate] = []
    for size in world_sizes(world, cluster):  # every device first; fewer only when the full world cannot divide
        candidates = [estimate(job, cluster, lay) for lay in layouts(job, size)]
        if any(e.fits for e in candidates):
            world = size
            break
    fitting = sorted((e for e in candidates if e.fits), key=lambda e: e.step_s)
    result: dict[str, Any] = {"cluster": cluster.name, "world": world, "considered": len(candidates),
                              "fitting": len(fitting), "top": fitting[:top], "why": []}
    if fitting and world < int(cluster.need("devices")):
        result["why"].append(f"uses {world} of {int(cluster.need('devices'))} devices: no layout of the full "
                             "world size divides the model and the batch and fits")
    if not fitting:
        smallest = min(candidates, key=lambda e: e.memory["total"], default=None)
        result["why"].append("no layout fits in memory" + (
            f": the smallest needs {smallest.memory['total'] / 1e9:.1f} GB per device ({smallest.layout.label()})"
            if smallest else ": no layout divides the model and batch at this world size"))
        return result
    result["why"] = explain(job, cluster, fitting) + result["why"]
    return result


def world_sizes(devices: int, cluster: Cluster) -> list[int]:
    """The full world, then smaller ones in whole machines (or, inside one machine, every size)."""
    node = int(cluster.figure("devices_per_node").value or 1)
    step = node if devices > node else 1
    return list(range(devices, 0, -step)) if devices % step == 0 else [devices, *range(devices - devices % step, 0, -step)]


def duration(seconds: float) -> str:
    return f"{seconds:.3g} s" if seconds >= 1 else f"{seconds * 1e3:.3g} ms"


def explain(job: Job, cluster: Cluster, ranked: list[Estimate]) -> list[str]:
    best = ranked[0]
    why = [f"fastest of {len(ranked)} fitting layouts: {duration(best.step_s)} per step, "
           f"MFU {best.mfu:.0%}"]
    if len(ranked) > 1:
        why.append(f"the runner-up ({ranked[1].layout.label()}) is {ranked[1].step_s / best.step_s - 1:.1%} slower")
    for group, size in (("tp", best.layout.tp), ("cp", best.layout.cp), ("ep", best.layout.ep)):
        if size > 1 and best.links[group] == "domain":
            try:
                across = estimate(job, cluster, best.layout, {group: "scale-out"})
            except ValueError:
                continue
            why.append(f"{group.upper()} {size} fits inside the {int(cluster.need('domain_size'))}-device domain; "
                       f"{group.upper()} {size} across the scale-out network would cost "
                       f"{across.step_s / best.step_s - 1:.0%} more")
    lay = best.layout
    if lay.recompute != "none":
        alt = replace(lay, recompute="none")
        e = estimate(job, cluster, alt)
        if not e.fits:
            why.append(f"{lay.recompute} recomputation because without it the layout needs "
                       f"{e.memory['total'] / 1e9:.1f} GB per device")
    return why
