"""S0 plan (parent side): one child on the fake process group at the real world size checks the
program's parallel plan (shapes, shardings, the stages its ``parallelize`` declares)."""

from __future__ import annotations

import os
import time
from typing import Any

from ...records import PlanJob, PlanStatus, other_tree
from ...verdict import Verdict, worst
from ..results import StageResult
from ..stage_kit import StageContext, failure_text


def run(ctx: StageContext) -> StageResult:
    """S0: the plan check; records the declared parallel stages for S2/S3 (``ctx.declared_stages``)."""
    from .. import launcher

    opts = ctx.opts
    ctx.say(f"S0: parallel plan at world size {opts.plan_world_size} on the fake process group")
    t0 = time.monotonic()
    job = PlanJob(tree=ctx.migrated, other_tree=other_tree(ctx.migrated, ctx.original, ctx.migrated),
                  pythonpath=opts.pythonpath, entry=opts.entry, seed=opts.seed, threads=opts.threads,
                  world_size=opts.plan_world_size, tp=opts.plan_tp, out=os.path.join(ctx.work, "s0"),
                  dp_variants=tuple(opts.dp_variants), batch_step=opts.parallel_steps[0])
    res = launcher.wait(launcher.start(job, "plan", launcher.child_env(opts.seed, opts.threads), opts.timeout),
                        PlanStatus)
    status = res.status
    bench: dict[str, Any] = {"seconds": round(time.monotonic() - t0, 2), "world_size": opts.plan_world_size}
    failure = res.failure()
    if failure is not None and failure.phase in ("entry", "harness"):
        return StageResult("S0", Verdict.ERROR, reason=f"plan check could not run: {failure_text(failure)}",
                           bench=bench, summary="plan check could not run")
    ctx.layers.setdefault("migrated", dict(status.layers))
    rows = status.checks
    bench.update(status.bench)
    ctx.declared_stages = list(status.declared)
    verdict = worst(c["status"] for c in rows) if rows else Verdict.ERROR
    failed = [c for c in rows if c["status"] == Verdict.FAIL]
    reason = "; ".join(f"{c['check']}: {c.get('message', '')}" for c in failed[:3]) or None
    checks = tuple(dict(c) for c in rows)
    if not checks:
        reason = failure_text(status) if res.statuses else "no plan checks ran"
    return StageResult("S0", verdict, summary=status.summary, reason=reason, checks=checks, bench=bench,
                       notes=status.notes)
