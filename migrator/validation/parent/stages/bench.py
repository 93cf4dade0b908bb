"""Stage benchmarks (parent side of ``migrate validate --bench``; no torch here).

Per benchmarked stage (S1 one card, S2 data parallel, S3 model parallel) and per side (original,
migrated): ``repeats`` child runs of :mod:`.bench` (torchrun for S2/S3), one after the other so
they never share the machine. Each repeat is its own process so a crash, hang (killed at
``bench_timeout``) or NaN is counted and explained without losing the others. The figures are
pooled over the repeats that finished; ``crash_rate`` is failed repeats / repeats.
"""

from __future__ import annotations

import os
import statistics
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

from ...records import DATA_PARALLEL, STAGE_OF, BenchJob, BenchStatus, Side, other_tree
from ..options import Options
from ..perf.records import (
    COMM_KINDS,
    NO_FIGURES,
    RATIO_NOTE,
    BenchConfig,
    RepeatFailure,
    ScalingRow,
    SideFigures,
    SidePerf,
    StagePerf,
    StepTime,
)
from ..results import StageResult
from ..stage_kit import Progress, StageContext, failure_text

CPU_LABEL = "CPU run: proves the measurement machinery, not hardware speed"


def _variant(sid: str, opts: Options, ctx: StageContext) -> str | None:
    """The one parallel variant S2/S3 is timed with (the first the program declares); None for S1."""
    if sid == "S1":
        return None
    variants = list(opts.dp_variants if sid == "S2" else opts.mp_variants)
    declared = ctx.declared_stages
    if declared:
        hit = [v for v in variants if STAGE_OF[v] in declared]
        if hit:
            return hit[0]
    if sid == "S3":
        return None if declared is not None else (variants[0] if variants else None)
    return variants[0] if variants else None


def _repeat(job: BenchJob, name: str, opts: Options, ranks: int) -> dict[str, Any]:
    """One timed child run: ``ok`` with the rank statuses, or the kind of failure (hang, nan, crash, error)."""
    from .. import launcher

    env = launcher.child_env(opts.seed, opts.threads)
    if ranks > 1 or job.variant:
        child = launcher.start_torchrun(job, name, env, opts.world_size, nnodes=opts.nnodes,
                                        rdzv_endpoint=opts.rdzv_endpoint, timeout=opts.bench_timeout)
    else:
        child = launcher.start(job, name, env, opts.bench_timeout)
    res = launcher.wait(child, BenchStatus)
    if res.timed_out:
        done = [s for s in res.statuses if s.ok]
        return {"ok": False, "kind": "hang", "reason": f"no finish within {opts.bench_timeout:g} s (killed; "
                f"{len(done)} of {res.expected} rank(s) had finished)", "statuses": res.statuses}
    nan = [s for s in res.statuses if s.phase == "nan"]
    if nan:
        return {"ok": False, "kind": "nan", "reason": nan[0].error.summary if nan[0].error else "non-finite loss",
                "statuses": res.statuses}
    failure = res.failure()
    if failure is not None:
        kind = "error" if failure.phase in ("entry", "harness") else "crash"
        return {"ok": False, "kind": kind, "reason": failure_text(failure), "statuses": res.statuses}
    return {"ok": True, "statuses": sorted(res.statuses, key=lambda s: s.rank or 0)}


def measure_side(sid: str, side: Side, tree: str, variant: str | None, opts: Options, work: str,
                 progress: Progress, other: str | None = None) -> SidePerf:
    """One side's figures for stage ``sid``: the repeats, their failures, step time, throughput, MFU, memory."""
    ranks = 1 if sid == "S1" else opts.world_size * opts.nnodes
    runs: list[list[BenchStatus]] = []
    failures: list[RepeatFailure] = []
    for r in range(opts.repeats):
        repeat_dir = os.path.join(work, "bench", sid.lower(), side, f"repeat{r}")
        job = BenchJob(side=side, tree=tree, other_tree=other, pythonpath=opts.pythonpath, entry=opts.entry, seed=opts.seed, threads=opts.threads, stage=sid,
                       variant=variant, bf16_policy=opts.bf16_policy, steps=opts.bench_steps, warmup=opts.bench_warmup,
                       profile_steps=opts.bench_profile_steps, out=repeat_dir,
                       batch_step=opts.parallel_steps[0] if sid != "S1" else opts.steps[0])
        if progress is not None:
            progress(f"{sid} bench: {side} side, repeat {r + 1}/{opts.repeats} ({ranks} rank(s))")
        rep = _repeat(job, f"bench-{sid}-{side}-{r}", opts, ranks)
        if rep["ok"]:
            runs.append(rep["statuses"])
        else:
            failures.append(RepeatFailure(repeat=r, kind=rep["kind"], reason=rep["reason"][:400]))
    return SidePerf(ranks=ranks, repeats=opts.repeats, ok_repeats=len(runs),
                    crash_rate=round(len(failures) / opts.repeats, 4) if opts.repeats else 0.0,
                    failures=tuple(failures), figures=_figures(runs, variant, ranks, opts) if runs else None)


def _figures(runs: list[list[BenchStatus]], variant: str | None, ranks: int, opts: Options) -> SideFigures:
    """The figures pooled over the finished repeats (each a list of its rank statuses)."""
    from ..perf.peaks import lookup

    first = runs[0][0]
    device = first.device or "cpu"
    # the slowest rank defines a step
    times = [max(vals) for statuses in runs for vals in zip(*[s.step_times for s in statuses])]
    t = summarize_times(times)
    data_parallel = variant in DATA_PARALLEL
    samples_step = _per_step([s.samples_per_step for s in runs[0]], data_parallel)
    tokens_step = _per_step([s.tokens_per_step for s in runs[0]], data_parallel)
    flops_step = sum(s.flops_per_step or 0 for s in runs[0])
    med = t.median_s or 0.0
    achieved = flops_step / med / 1e12 if med > 0 else None
    peak = lookup(first.device_name, first.dtype or "bfloat16", opts.peak_tflops)
    peak_tflops = peak["tflops"]
    mfu = achieved / (peak_tflops * ranks) if peak_tflops and achieved is not None else None
    shares = [s.comm_share for statuses in runs for s in statuses if s.comm_share is not None]
    comm: dict[str, float | None] = {}
    for key in COMM_KINDS:
        vals = [c.share(key) for c in shares]
        comm[key] = round(statistics.fmean(vals), 6) if vals else None
    mems = [s.peak_memory for statuses in runs for s in statuses if s.peak_memory is not None]
    return SideFigures(
        device=device, device_name=first.device_name, dtype=first.dtype,
        how=first.how, label=CPU_LABEL if device == "cpu" else None, step_time=_rounded(t),
        samples_per_step=samples_step, tokens_per_step=tokens_step,
        samples_per_s=round(samples_step / med, 3) if samples_step and med > 0 else None,
        tokens_per_s=round(tokens_step / med, 3) if tokens_step and med > 0 else None,
        flops_per_step=flops_step, achieved_tflops=achieved,
        peak_tflops=peak.get("tflops"), peak_source=peak.get("source") or peak.get("why"),
        mfu=mfu, mfu_note=None if mfu is not None else peak.get("why", "n/a: unknown peak"),
        comm_share=comm,
        peak_memory_bytes=max(m.bytes for m in mems) if mems else None,
        peak_memory_kind=mems[0].kind if mems else None,
    )


def _per_step(per_rank: list[int | None], data_parallel: bool) -> int | None:
    """Samples (tokens) per step: every rank's own under data parallelism, else one rank's."""
    known = [n for n in per_rank if n is not None]
    if len(known) != len(per_rank) or not known:
        return None
    return sum(known) if data_parallel else known[0]


RATIO_KEYS: tuple[tuple[str, Callable[[SideFigures], float | None]], ...] = (
    ("step_time_median_s", lambda f: f.step_time.median_s if f.step_time else None),
    ("samples_per_s", lambda f: f.samples_per_s),
    ("tokens_per_s", lambda f: f.tokens_per_s),
    ("achieved_tflops", lambda f: f.achieved_tflops),
    ("mfu", lambda f: f.mfu),
    ("peak_memory_bytes", lambda f: f.peak_memory_bytes))


def run(ctx: StageContext, result: StageResult) -> StageResult:
    """``result`` of the stage ``ctx.stage`` with its ``perf`` benchmark added (S0, a plan check: unchanged)."""
    perf = stage_perf(ctx)
    if perf is None:
        return result
    return replace(result, perf=perf)


def stage_perf(ctx: StageContext) -> StagePerf | None:
    """The ``perf`` of stage ``ctx.stage`` (None for S0: a plan check, nothing is timed)."""
    sid, opts = ctx.stage, ctx.opts
    if sid == "S0":
        return None
    variant = _variant(sid, opts, ctx)
    if sid == "S3" and variant is None:
        return StagePerf(skipped="no tensor/expert-parallel plan to benchmark")
    config = BenchConfig(steps=opts.bench_steps, warmup=opts.bench_warmup, repeats=opts.repeats,
                         profile_steps=opts.bench_profile_steps, timeout_s=opts.bench_timeout,
                         bf16_policy=opts.bf16_policy, variant=variant,
                         step="forward + backward (optimizer step not included)")
    migrated = measure_side(sid, "migrated", ctx.migrated, variant, opts, ctx.work, ctx.progress,
                            other=other_tree(ctx.migrated, ctx.original, ctx.migrated))
    if ctx.recorded is not None:
        original = SidePerf(skipped="reference side recorded elsewhere (--compare): not benchmarked here")
    else:
        original = measure_side(sid, "original", ctx.original, variant, opts, ctx.work, ctx.progress,
                                other=other_tree(ctx.original, ctx.original, ctx.migrated))
    ratio: dict[str, float | None] = {}
    for key, get in RATIO_KEYS:
        a, b = get(original.measured), get(migrated.measured)
        ratio[key] = round(b / a, 4) if a is not None and b is not None and a else None
    measured = [migrated] if ctx.recorded is not None else [original, migrated]
    labelled = any(side.measured.label for side in measured)
    return StagePerf(config=config, original=original, migrated=migrated, ratio=ratio, ratio_note=RATIO_NOTE,
                     label=CPU_LABEL if labelled else None)


def scaling(stages: Sequence[StageResult], opts: Options) -> tuple[ScalingRow, ...]:
    """1 card (S1) → N ranks (S2, S3) → supernode layout: throughput and efficiency
    throughput(N) / (N × throughput(1)) of the migrated side."""
    perfs = {s.id: s.perf for s in stages}

    def migrated(sid: str) -> SideFigures:
        perf = perfs.get(sid)
        return perf.migrated.measured if perf is not None and perf.migrated is not None else NO_FIGURES

    base = migrated("S1")
    unit = "tokens_per_s" if base.tokens_per_s else "samples_per_s"
    one = getattr(base, unit)
    lines: list[ScalingRow] = []
    if one:
        lines.append(ScalingRow(layout="1 card (S1)", ranks=1, throughput=one, unit=unit, efficiency=1.0,
                                measured=True))
    for sid in ("S2", "S3"):
        perf = perfs.get(sid)
        thr = getattr(migrated(sid), unit)
        if thr and perf is not None and perf.migrated is not None:
            n = perf.migrated.ranks or 1
            variant = perf.config.variant if perf.config is not None else None
            lines.append(ScalingRow(layout=f"{n} ranks ({sid} {variant})", ranks=n, throughput=thr, unit=unit,
                                    efficiency=round(thr / (n * one), 4) if one else None, measured=True))
    if lines:
        lines.append(ScalingRow(layout=f"supernode plan ({opts.plan_world_size} ranks)", ranks=opts.plan_world_size,
                                throughput=None, unit=unit, efficiency=None, measured=False,
                                note="not measured: S0 checks this layout on the fake process group only; run "
                                     "--nproc-per-node/--nnodes at that size on the cluster to time it"))
    return tuple(lines)


def summarize_times(times: list[float]) -> StepTime:
    """Median and spread of step times (seconds)."""
    ordered = sorted(times)
    q = statistics.quantiles(ordered, n=4) if len(ordered) >= 2 else [ordered[0]] * 3
    return StepTime(median_s=statistics.median(ordered), min_s=ordered[0], max_s=ordered[-1], iqr_s=q[2] - q[0],
                    stdev_s=statistics.stdev(ordered) if len(ordered) > 1 else 0.0, n=len(ordered))


def _rounded(t: StepTime) -> StepTime:
    """As the result shows it: every float to 6 digits (the throughputs use the unrounded median)."""
    def r(v: float | None) -> float | None:
        return round(v, 6) if isinstance(v, float) else v

    return StepTime(median_s=r(t.median_s), min_s=r(t.min_s), max_s=r(t.max_s), iqr_s=r(t.iqr_s),
                    stdev_s=r(t.stdev_s), n=t.n)
