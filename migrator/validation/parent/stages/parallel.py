"""S2/S3 (parent side): N ranks through torchrun, each rank running the unsharded reference on its own
micro-batch and the parallel variants (S2 data parallel: DDP, FSDP2; S3 model parallel: TP, EP)."""

from __future__ import annotations

import os
import time
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from ...facts import CheckRow
from ...records import ParallelJob, RankStatus, VariantRuns, other_tree
from ...verdict import Verdict
from ..comparison.compare import Comparison, Run, compare_runs
from ..results import StageResult
from ..stage_kit import StageContext, could_not_run, crash_module, failure_text, numeric_stage, required_run


def run(ctx: StageContext) -> StageResult:
    """S2 (data parallel: DDP, FSDP2) or S3 (model parallel: TP, EP), whichever ``ctx.stage`` is."""
    from .. import launcher

    sid, opts = ctx.stage, ctx.opts
    nprocs = opts.world_size * opts.nnodes
    variants = _variants(ctx)
    if isinstance(variants, StageResult):
        return variants
    ctx.say(f"{sid}: {', '.join(variants)} on {nprocs} ranks (torchrun) against the unsharded run")
    t0 = time.monotonic()
    job = ParallelJob(stage="S2" if sid == "S2" else "S3", variants=tuple(variants), tree=ctx.migrated,
                      other_tree=other_tree(ctx.migrated, ctx.original, ctx.migrated), pythonpath=opts.pythonpath,
                      entry=opts.entry, seed=opts.seed, threads=opts.threads, steps=tuple(opts.parallel_steps),
                      bf16_policy=opts.bf16_policy, out=os.path.join(ctx.work, sid.lower()), max_bytes=opts.max_bytes)
    child = launcher.start_torchrun(job, sid, launcher.child_env(opts.seed, opts.threads), opts.world_size,
                                    nnodes=opts.nnodes, rdzv_endpoint=opts.rdzv_endpoint, timeout=opts.timeout)
    res = launcher.wait(child, RankStatus)
    bench: dict[str, Any] = {"seconds": round(time.monotonic() - t0, 2), "ranks": nprocs}
    failure = res.failure()
    if failure is not None:
        if failure.phase in ("entry", "harness"):
            return StageResult(sid, Verdict.ERROR, summary=could_not_run("migrated", failure), bench=bench,
                               reason=f"{sid} could not run: {failure_text(failure)}")
        return StageResult(sid, Verdict.FAIL, summary="the migrated program failed on the ranks", bench=bench,
                           reason=f"migrated program failed {failure_text(failure)}",
                           first_divergence=crash_module(failure))
    ran, skipped = res.statuses[0].variants, res.statuses[0].skipped
    if not ran:
        why = "; ".join(f"{v}: {w}" for v, w in skipped.items()) or "no variant applies"
        return StageResult(sid, Verdict.NOT_RUN, summary="nothing to run", reason=why, bench=bench)
    comparison, extra_checks = _compare(ran)
    notes = [f"{v}: skipped ({w})" for v, w in skipped.items()]
    notes.append("reference: the unsharded model on one process running each rank's micro-batch, grads "
                 "accumulated with 1/N (= the 1-rank run at the global batch for mean losses)")
    for rank_status in res.statuses:
        for note in rank_status.notes:
            if note not in notes:
                notes.append(note)
    bench.update({f"{v}_seconds": info.seconds for v, info in ran.items()})
    result = numeric_stage(sid, comparison, bench=bench, notes=notes,
                           extra_summary=", ".join(f"{v} x{nprocs}" for v in ran),
                           extra_checks=tuple(extra_checks))
    shard_cause = _shard_cause(ran, nprocs, comparison) if sid == "S3" and result.status == Verdict.FAIL else None
    if shard_cause is None:
        return result
    return replace(result, first_divergence="; ".join(filter(None, (result.first_divergence, shard_cause))))


def _shard_cause(ran: Mapping[str, VariantRuns], nprocs: int, comparison: Comparison) -> str | None:
    """Where a failing S3 run's rank-local activations stop being shards of the original's, upstream of its
    first failing tensor (localisation only: the verdict is the graded tensors')."""
    from ..localisation import shards
    from ..localisation.first_failure import localise

    loc = localise(comparison.verdicts)
    first = next((v for v in comparison.verdicts if loc is not None and f"{v.label}{v.name}" == loc.tensor), None)
    before = first.match if first is not None and first.label.startswith("tp/") else None
    for info in (info for variant, info in ran.items() if variant == "tp"):  # EP's rank-local tensors are experts'
        for per_rank in info.runs.values():
            for rank, dirs in sorted(per_rank.items(), key=lambda kv: int(kv[0])):
                run, golden = Run.load(dirs.get("fp32")), Run.load(dirs.get("ref_fp32"))
                found = shards.cause(golden, run, nprocs, int(rank), before) if run and golden else None
                if found:
                    return found
    return None


def _variants(ctx: StageContext) -> list[str] | StageResult:
    """The variants to launch, or the not-run result when the plan S0 read declares none of this stage's."""
    sid = ctx.stage
    variants = list(ctx.opts.dp_variants if sid == "S2" else ctx.opts.mp_variants)
    declared = ctx.declared_stages  # known when S0 ran: skip a launch that has nothing to run
    if declared is None:
        return variants
    if sid == "S3":
        variants = [v for v in variants if v in declared]
        if not variants:
            return StageResult(sid, Verdict.NOT_RUN, summary="no tensor/expert-parallel plan",
                               reason="the program declares no 'tp' or 'ep' stage (parallelize(model, mesh, stage))")
    elif declared and not {"dp", "fsdp"} & set(declared):
        return StageResult(sid, Verdict.NOT_RUN, summary="no data-parallel plan",
                           reason=f"the program's parallelize declares {', '.join(declared)} only "
                                  "(its data parallelism is checked in S3)")
    return variants


def _compare(ran: Mapping[str, VariantRuns]) -> tuple[Comparison, list[CheckRow]]:
    """Every rank's variant runs against its unsharded reference, and the variants' own check rows."""
    comparison = Comparison()
    extra_checks: list[CheckRow] = []
    for variant, info in ran.items():
        for step_key, per_rank in info.runs.items():
            for rank, dirs in sorted(per_rank.items(), key=lambda kv: int(kv[0])):
                golden = required_run(dirs["ref_fp32"], "reference fp32")
                comparison.extend(compare_runs(golden, Run.load(dirs["ref_bf16"]), Run.load(dirs["fp32"]),
                                               Run.load(dirs["bf16"]), label=f"{variant}/{step_key}/rank{rank}/"))
        for check in info.checks:
            row = check.copy()
            row["check"] = f"{variant}: {check['check']}"
            extra_checks.append(row)
    return comparison, extra_checks
