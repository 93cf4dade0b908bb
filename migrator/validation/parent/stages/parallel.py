"""S0 plan (one child on the fake process group at the real world size) and S2/S3 (N ranks through
torchrun, each rank running the unsharded reference on its own micro-batch and the parallel variants:
DDP, FSDP2 / TP, EP), parent side."""

from __future__ import annotations

import os
import time
from typing import Any

from ..records import ParallelJob, PlanJob, PlanStatus, RankStatus
from .compare import FAIL, Comparison, Run, compare_runs, worst_status
from .options import Options
from .results import StageResult
from .stage_common import (
    Progress,
    StageContext,
    _crash_module,
    _failure_text,
    _required_run,
    _say,
    could_not_run,
    numeric_stage,
)


def run_s0(opts: Options, migrated: str, work: str, ctx: StageContext, progress: Progress = None) -> StageResult:
    from . import launcher

    _say(progress, f"S0: parallel plan at world size {opts.plan_world_size} on the fake process group")
    t0 = time.monotonic()
    job = PlanJob(tree=migrated, entry=opts.entry, seed=opts.seed, threads=opts.threads,
                  world_size=opts.plan_world_size, tp=opts.plan_tp, out=os.path.join(work, "s0"),
                  dp_variants=tuple(opts.dp_variants), batch_step=opts.parallel_steps[0])
    res = launcher.wait(launcher.start(job, "plan", launcher.child_env(opts.seed, opts.threads), opts.timeout),
                        PlanStatus)
    status = res.status
    bench: dict[str, Any] = {"seconds": round(time.monotonic() - t0, 2), "world_size": opts.plan_world_size}
    failure = res.failure()
    if failure is not None and failure.phase in ("entry", "harness"):
        return StageResult("S0", "error", reason=f"plan check could not run: {_failure_text(failure)}", bench=bench,
                           summary="plan check could not run")
    ctx.layers.setdefault("migrated", dict(status.layers))
    checks = tuple(dict(c) for c in status.checks)
    bench.update(status.bench)
    ctx.declared_stages = list(status.declared)
    st = worst_status(c["status"] for c in checks) if checks else "error"
    failed = [c for c in checks if c["status"] == FAIL]
    reason = "; ".join(f"{c['check']}: {c.get('message', '')}" for c in failed[:3]) or None
    if not checks:
        reason = _failure_text(status) if res.statuses else "no plan checks ran"
    return StageResult("S0", st, summary=status.summary, reason=reason, checks=checks, bench=bench,
                       notes=status.notes)


def run_parallel_stage(sid: str, opts: Options, migrated: str, work: str, ctx: StageContext,
                       progress: Progress = None) -> StageResult:
    """S2 (data parallel: DDP, FSDP2) or S3 (model parallel: TP, EP) through torchrun."""
    from . import launcher

    variants = list(opts.dp_variants if sid == "S2" else opts.mp_variants)
    nprocs = opts.world_size * opts.nnodes
    declared = ctx.declared_stages  # known when S0 ran: skip a launch that has nothing to run
    if declared is not None:
        if sid == "S3":
            variants = [v for v in variants if v in declared]
            if not variants:
                return StageResult(sid, "not_run", summary="no tensor/expert-parallel plan",
                                   reason="the program declares no 'tp' or 'ep' stage (parallelize(model, mesh, stage))")
        elif declared and not {"dp", "fsdp"} & set(declared):
            return StageResult(sid, "not_run", summary="no data-parallel plan",
                               reason=f"the program's parallelize declares {', '.join(declared)} only "
                                      "(its data parallelism is checked in S3)")
    _say(progress, f"{sid}: {', '.join(variants)} on {nprocs} ranks (torchrun) against the unsharded run")
    t0 = time.monotonic()
    out = os.path.join(work, sid.lower())
    job = ParallelJob(stage="S2" if sid == "S2" else "S3", variants=tuple(variants), tree=migrated,
                      entry=opts.entry, seed=opts.seed, threads=opts.threads, steps=tuple(opts.parallel_steps),
                      bf16_policy=opts.bf16_policy, out=out, max_bytes=opts.max_bytes)
    child = launcher.start_torchrun(job, sid, launcher.child_env(opts.seed, opts.threads), opts.world_size,
                                    nnodes=opts.nnodes, rdzv_endpoint=opts.rdzv_endpoint, timeout=opts.timeout)
    res = launcher.wait(child, RankStatus)
    bench: dict[str, Any] = {"seconds": round(time.monotonic() - t0, 2), "ranks": nprocs}
    failure = res.failure()
    if failure is not None:
        phase = failure.phase
        if phase in ("entry", "harness"):
            return StageResult(sid, "error", summary=could_not_run("migrated", failure), bench=bench,
                               reason=f"{sid} could not run: {_failure_text(failure)}")
        return StageResult(sid, FAIL, summary="the migrated program failed on the ranks", bench=bench,
                           reason=f"migrated program failed {_failure_text(failure)}",
                           first_divergence=_crash_module(failure))
    rank0 = res.statuses[0]
    ran = rank0.variants
    skipped = rank0.skipped
    if not ran:
        why = "; ".join(f"{v}: {w}" for v, w in skipped.items()) or "no variant applies"
        return StageResult(sid, "not_run", summary="nothing to run", reason=why, bench=bench)
    comparison = Comparison()
    extra_checks: list[dict[str, Any]] = []
    for variant, info in ran.items():
        for step_key, per_rank in info.runs.items():
            for rank, dirs in sorted(per_rank.items(), key=lambda kv: int(kv[0])):
                G, R = _required_run(dirs["ref_fp32"], "reference fp32"), Run.load(dirs["ref_bf16"])
                T32, T16 = Run.load(dirs["fp32"]), Run.load(dirs["bf16"])
                comparison.extend(compare_runs(G, R, T32, T16, label=f"{variant}/{step_key}/rank{rank}/"))
        for check in info.checks:
            extra_checks.append(dict(check, check=f"{variant}: {check['check']}"))
    notes = [f"{v}: skipped ({w})" for v, w in skipped.items()]
    notes.append("reference: the unsharded model on one process running each rank's micro-batch, grads "
                 "accumulated with 1/N (= the 1-rank run at the global batch for mean losses)")
    for s in res.statuses:
        for n in s.notes:
            if n not in notes:
                notes.append(n)
    bench.update({f"{v}_seconds": info.seconds for v, info in ran.items()})
    return numeric_stage(sid, comparison, bench=bench, notes=notes,
                         extra_summary=", ".join(f"{v} x{nprocs}" for v in ran),
                         extra_checks=tuple(extra_checks))
