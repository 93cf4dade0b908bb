"""Estimate one layout's step, enumerate the valid layouts, rank them by step time, say why the best wins."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from .clusters import Cluster, MissingFigure
from .cost import Layout
from .estimate import Estimate, Job, estimate

__all__ = ["Estimate", "Job", "estimate", "layouts", "search", "explain", "compare"]

RECOMPUTE = ("none", "selective", "full")


def _divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


def layouts(job: Job, world: int, tp_max: int | None = None, ascend: bool = False) -> list[Layout]:
    """Every layout that divides: tp | heads and kv-heads (and <= the domain when asked), 2 cp | seq
    (load-balanced causal chunks, cp <= 16, at least `cp_min_tokens` per device, flash attention only),
    pp <= layers (uneven stages allowed; vpp 2 when the stages split evenly), dp | global batch, ep | experts
    and dp, ZeRO 1-3, micro-batch a power of two dividing the batch per replica (the search stops growing it
    once it no longer fits); MoE with TP also expert-TP 1; on Ascend with TP also MC2 on. More virtual stages
    and a lighter last stage are tried on the best of these (`_refine`)."""
    m = job.model
    out = []
    a = job.assumptions
    cps = [c for c in _divisors(world) if c == 1 or (c <= 16 and job.seq % (2 * c) == 0
                                                     and job.seq // c >= a.cp_min_tokens)] \
        if a.attention == "flash" else [1]
    for tp in _divisors(world):
        if m.heads % tp or (not m.mla and m.kv_heads % tp) or (tp_max and tp > tp_max):
            continue
        for cp in (c for c in cps if (world // tp) % c == 0):
            for pp in _divisors(world // (tp * cp)):
                dp = world // (tp * cp * pp)
                if pp > m.layers or job.global_batch % dp:
                    continue
                vpps = [1] + ([2] if pp > 1 and m.layers % (2 * pp) == 0 else [])
                eps = [e for e in _divisors(dp * cp) if m.experts % e == 0 and dp % e == 0] if m.moe else [1]
                per_replica = job.global_batch // dp
                mbs = [b for b in (1, 2, 4, 8, 16) if per_replica % b == 0]
                etps = [0] + ([1] if m.moe and tp > 1 else [])
                mc2s = [False] + ([True] if ascend and tp > 1 else [])
                for ep, etp, mc2 in ((e, x, c) for e in eps for x in etps for c in mc2s):
                    for zero in (1, 2, 3) if dp * cp > 1 else (0,):
                        for rc in RECOMPUTE:
                            for vpp in vpps:
                                out += [Layout(tp, cp, pp, dp, ep, zero, rc, mb, vpp, etp=etp, mc2=mc2) for mb in mbs]
    return out


def _ranked(job: Job, cluster: Cluster, candidates: list[Layout]) -> list[Estimate]:
    """Estimates of the candidates; a micro-batch larger than the first that does not fit is skipped."""
    out = []
    too_big: set[Layout] = set()
    for lay in candidates:
        key = replace(lay, micro_batch=1)
        if key in too_big:
            continue
        e = estimate(job, cluster, lay)
        if not e.fits and lay.micro_batch >= 1:
            too_big.add(key)
        out.append(e)
    return out


def search(job: Job, cluster: Cluster, world: int | None = None, top: int = 5,
           sizes: list[int] | None = None, seeds: tuple[Layout, ...] = ()) -> dict[str, Any]:
    """Rank the layouts at the first size that has a fitting one: `sizes` in order (smallest first, see
    `sizing`), or else `world` (default: every device) and then fewer when it cannot divide. `seeds` (a given
    or published layout of that world) join the candidates, so the pick is never predicted slower than them."""
    world = world or int(cluster.need("devices"))
    required = ["domain_size", "domain_GBps", "hbm_GB", "hbm_GBps", f"peak_tflops_{job.dtype}"] + \
        (["peak_tflops_bf16"] if job.dtype == "fp8" else [])
    domain = cluster.figure("domain_size").value
    if domain is None or max(sizes or [world]) > domain:
        required.append("scale_out_GBps")
    missing = [k for k in required if cluster.figure(k).value is None]
    if missing:  # name every missing figure at once
        raise MissingFigure(
            f"cluster {cluster.name!r}: no sourced value for {', '.join(missing)} (" +
            "; ".join(f"{k}: {cluster.figure(k).source}" for k in missing) + "); required inputs: set them in "
            f"pyproject.toml under [tool.migrate.clusters.{cluster.name}]")
    candidates: list[Estimate] = []
    asked, smaller = world, None
    for size in sizes or world_sizes(world, cluster):  # without `sizes`: every device first, fewer if it cannot divide
        candidates = _ranked(job, cluster, layouts(job, size, ascend=cluster.ascend))
        candidates += [estimate(job, cluster, s) for s in seeds if s.world == size]
        world = size
        if any(e.fits for e in candidates):
            break
        smaller = (size, min((e.memory["total"] for e in candidates), default=None))
    fitting = sorted((e for e in candidates if e.fits), key=lambda e: (e.step_s, e.memory["total"]))
    fitting = _refine(job, cluster, fitting, [s for s in seeds if s.world == world])
    world = world if fitting or sizes else asked
    result: dict[str, Any] = {"cluster": cluster.name, "world": world, "considered": len(candidates),
                              "fitting": len(fitting), "top": fitting[:top], "why": []}
    if fitting and sizes:
        from .sizing import reason

        result["why"].append(reason(world, cluster, job.global_batch, smaller))
    elif fitting and world < asked:
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


REFINE_TOP = 8  # pipelined layouts whose virtual stages and last stage are searched in full


def _refine_bases(job: Job, ranked: list[Estimate]) -> list[Layout]:
    """The REFINE_TOP pipelined layouts (distinct but for their virtual stages) that virtual stages could make
    fastest: ranked by their step with the bubble cut to 1 / (layers / pp), the most interleaving can do
    (an interleaved bubble is the 1F1B one / v); layouts with the same estimate count once. Ranking by the
    step at VPP 1 or 2 left out bases whose bubble was large but removable (a published Llama 3.1 405B
    layout, session 11)."""
    def bound(e: Estimate) -> float:
        return e.step_s - e.bubble_s * (1 - 1 / max(1, job.model.layers // e.layout.pp))

    out: list[Layout] = []
    same: set[tuple[float, float]] = set()  # e.g. selective and no recomputation under flash attention
    for e in sorted((e for e in ranked if e.layout.pp > 1), key=bound):
        base = replace(e.layout, vpp=1, last=0)
        twin = (round(e.step_s, 9), round(e.memory["total"]))
        if base not in out and twin not in same:
            out.append(base)
            same.add(twin)
        if len(out) == REFINE_TOP:
            break
    return out


def _refine(job: Job, cluster: Cluster, ranked: list[Estimate], seeds: list[Layout] | None = None) -> list[Estimate]:
    """For the best pipelined layouts: every virtual-stage count 1..layers/pp, each with the even split and the
    last stage lightened to balance the LM head (`compute.best_last_stage`); re-ranked with the rest."""
    from .compute import best_last_stage
    from .estimate import device_of

    seen = {e.layout for e in ranked}
    extra = []
    dev = device_of(job, cluster)
    for base in _refine_bases(job, ranked) + [s for s in seeds or [] if s.pp > 1]:
        for vpp in range(1, job.model.layers // base.pp + 1):
            lay = replace(base, vpp=vpp, last=0)
            last = best_last_stage(job.model, lay, job.seq, dev, job.assumptions)
            for cand in {lay, replace(lay, last=last)}:
                if cand not in seen:
                    seen.add(cand)
                    e = estimate(job, cluster, cand)
                    if e.fits:
                        extra.append(e)
    return sorted(ranked + extra, key=lambda e: (e.step_s, e.memory["total"]))


def world_sizes(devices: int, cluster: Cluster) -> list[int]:
    """The full world, then smaller ones in whole machines (or, inside one machine, every size)."""
    node = int(cluster.figure("devices_per_node").value or 1)
    step = node if devices > node else 1
    return list(range(devices, 0, -step)) if devices % step == 0 else [devices, *range(devices - devices % step, 0, -step)]


def duration(seconds: float) -> str:
    return f"{seconds:.3g} s" if seconds >= 0.9995 else f"{seconds * 1e3:.3g} ms"  # 0.9999 s: "1 s", not "1e+03 ms"


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
    why += _pipeline_why(job, cluster, best)
    if lay.recompute != "none":
        alt = replace(lay, recompute="none")
        e = estimate(job, cluster, alt)
        if not e.fits:
            why.append(f"{lay.recompute} recomputation because without it the layout needs "
                       f"{e.memory['total'] / 1e9:.1f} GB per device")
    return why


def _pipeline_why(job: Job, cluster: Cluster, best: Estimate) -> list[str]:
    """Why its virtual stages (against VPP 1 and VPP + 1) and its last stage (against the even split)."""
    lay = best.layout
    out: list[str] = []
    if lay.pp == 1:
        return out
    for vpp in sorted({1, lay.vpp + 1} - {lay.vpp}):
        if lay.pp * vpp > job.model.layers:
            continue
        other = estimate(job, cluster, replace(lay, vpp=vpp))
        out.append(f"VPP {lay.vpp} over VPP {vpp}: bubble {best.bubble:.1%} vs {other.bubble:.1%} of the step, "
                   f"pp send/recv {best.comm_s.get('pp send/recv', 0) * 1e3:.3g} vs "
                   f"{other.comm_s.get('pp send/recv', 0) * 1e3:.3g} ms exposed, step {duration(best.step_s)} vs "
                   f"{duration(other.step_s)}" + ("" if other.fits else " (does not fit)"))
    if lay.last:
        even = estimate(job, cluster, replace(lay, last=0))
        out.append(f"last stage {lay.last} layers (the LM head's time in layers moved to the other stages): "
                   f"{even.step_s / best.step_s - 1:.1%} faster than the even split")
    return out


def compare(job: Job, cluster: Cluster, pick: Estimate, given: Estimate) -> list[str]:
    """Why the search prefers `pick` over a given (e.g. published) layout: the step-time terms that differ
    most, and memory when the given one does not fit."""
    gain = given.step_s / pick.step_s - 1
    head = (f"the search's pick ({pick.layout.label()}) is predicted {gain:.1%} "
            + ("faster" if gain >= 0 else "slower") + f" than the given layout ({given.layout.label()})")
    mine, theirs = pick.terms(), given.terms()
    deltas = sorted(((theirs.get(k, 0.0) - mine.get(k, 0.0), k) for k in set(mine) | set(theirs)), reverse=True)
    named = [f"{k} {d / given.step_s:+.1%} of the given step" for d, k in deltas if d > 0.01 * given.step_s][:3]
    lines = [head + (": it saves " + ", ".join(named) if named and gain > 0 else "")]
    if not given.fits:
        lines.append(f"the given layout needs {given.memory['total'] / 1e9:.1f} GB per device, more than the "
                     "memory headroom allows")
    return lines
