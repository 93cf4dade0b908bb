"""S1 parity-1card (parent side): the original side (G fp32, R bf16) and the migrated side (T32, T16) as
two concurrent children, the per-tensor and k-step comparisons, the precision policies, and the first
divergent op when a module fails."""

from __future__ import annotations

import os
import time
from collections.abc import Mapping
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from ...facts import NOISE_SUFFIX, CheckRow, TrainingFacts, noise_run
from ...records import Side, SideJob, SideStatus, Status, other_tree
from ...verdict import Verdict
from ..comparison.compare import Comparison, Run, compare_optimizer, compare_runs
from ..results import StageResult
from ..stage_kit import (
    StageContext,
    could_not_run,
    crash_module,
    failure_text,
    numeric_stage,
    required_run,
)

if TYPE_CHECKING:
    from ..launcher import ChildResult


def side_jobs(ctx: StageContext) -> tuple[SideJob, SideJob]:
    """The two S1 jobs: the original side (writes the shared weights and batches) and the migrated side."""
    opts = ctx.opts

    def job(side: Side, tree: str, out: str) -> SideJob:
        device = opts.device if (opts.record if side == "original" else opts.compare) else None
        return SideJob(side=side, tree=tree, other_tree=other_tree(tree, ctx.original, ctx.migrated), out=out,
                       pythonpath=opts.pythonpath, seed=opts.seed, threads=opts.threads, entry=opts.entry,
                       steps=tuple(opts.steps), policies=("fp32", "bf16"), bf16_policy=opts.bf16_policy,
                       shared=ctx.shared, max_bytes=opts.max_bytes, wait_timeout=opts.timeout, device=device)

    return (job("original", ctx.original, ctx.shared),
            job("migrated", ctx.migrated, os.path.join(ctx.work, "s1", "migrated")))


def run(ctx: StageContext) -> StageResult:
    """S1: both sides (or the migrated side against a recorded reference), then the comparisons."""
    t0 = time.monotonic()
    results = _run_sides(ctx)
    by_name = {r.name: r for r in results}
    orig_status = ctx.recorded if ctx.recorded is not None else by_name["original"].status
    mig_status = by_name["migrated"].status
    ctx.layers = {"original": dict(orig_status.layers), "migrated": dict(mig_status.layers)}
    ctx.note_imports({"original": orig_status, "migrated": mig_status})
    bench: dict[str, Any] = {"seconds": round(time.monotonic() - t0, 2)}
    for r in results:
        bench[f"{r.name}_seconds"] = round(r.seconds, 2)
    failed = _side_failure(ctx, by_name, orig_status, bench)
    if failed is not None:
        return failed
    comparison, notes, extra_checks, dropout_row = _compare(ctx, orig_status, mig_status)
    bench["compare_seconds"] = round(time.monotonic() - t0 - max(r.seconds for r in results), 2)
    bench["seconds"] = round(time.monotonic() - t0, 2)  # the stage's time includes the comparison
    result = numeric_stage("S1", comparison, bench=bench, notes=notes, extra_checks=extra_checks,
                           extra_summary=f"{len(ctx.opts.steps)} step(s), bf16 policy {ctx.opts.bf16_policy}")
    if dropout_row is not None and dropout_row["status"] == Verdict.NOT_COMPARABLE:  # neither pass nor fail
        return replace(result, status=Verdict.NOT_RUN, summary=dropout_row["message"])
    if result.status == Verdict.FAIL:
        result = _first_op(result, comparison, ctx, orig_status, mig_status)
        result = replace(result, bench=dict(result.bench, seconds=round(time.monotonic() - t0, 2)))
    return result


def _run_sides(ctx: StageContext) -> list[ChildResult[SideStatus]]:
    """The two sides as concurrent children (the migrated side only against a recorded reference)."""
    from .. import launcher

    opts = ctx.opts
    orig_job, mig_job = side_jobs(ctx)
    env = launcher.child_env(opts.seed, opts.threads)
    children = []
    if ctx.recorded is None:
        ctx.say("S1: original side (G fp32, R bf16) and migrated side (T) in two child processes")
        children.append(launcher.start(orig_job, "original", env, opts.timeout))
    else:
        ctx.say(f"S1: migrated side against the recorded reference {opts.compare}")
    children.append(launcher.start(mig_job, "migrated", env, opts.timeout))
    return [launcher.wait(c, SideStatus) for c in children]


def _side_failure(ctx: StageContext, by_name: Mapping[str, ChildResult[SideStatus]], orig_status: SideStatus,
                  bench: dict[str, Any]) -> StageResult | None:
    """The stage's result when a side could not run or failed; None when both ran."""
    original_res = None if ctx.recorded is not None else by_name["original"]
    for side, res in (("original", original_res), ("migrated", by_name["migrated"])):
        failure: Status | None = None
        if res is not None:
            failure = res.failure()
        elif not orig_status.ok:  # the recorded reference
            failure = orig_status
        if failure is None or failure.phase == "skipped":
            continue
        if failure.phase in ("entry", "harness"):
            return StageResult("S1", Verdict.ERROR, reason=f"{side} side could not run: {failure_text(failure)}",
                               bench=bench, summary=could_not_run(side, failure))
        if side == "original":  # nothing to compare against: no verdict on the migration (exit 2, never 1)
            return StageResult("S1", Verdict.ERROR, summary="could not run: the original program fails",
                               reason=f"could not run: original fails {failure_text(failure)}", bench=bench)
        return StageResult("S1", Verdict.FAIL, summary=f"the {side} program failed",
                           reason=f"{side} program failed {failure_text(failure)}",
                           first_divergence=crash_module(failure), bench=bench)
    return None


def _compare(ctx: StageContext, orig_status: SideStatus, mig_status: SideStatus
             ) -> tuple[Comparison, list[str], tuple[CheckRow, ...], CheckRow | None]:
    """(the per-tensor, optimizer and k-step comparison, notes, extra check rows, the dropout row)."""
    comparison = Comparison()
    cross = orig_status.device != mig_status.device
    notes: list[str] = []
    if cross:
        notes.append(f"cross-device comparison ({orig_status.device} vs {mig_status.device}): "
                     "fp32 logic bounds x10 (to calibrate on hardware)")
    for step in ctx.opts.steps:
        key = f"step{step}"
        golden = required_run(orig_status.runs.get(f"fp32/{key}"), f"original fp32/{key}")
        comparison.extend(compare_runs(golden, Run.load(orig_status.runs.get(f"bf16/{key}")),
                                       Run.load(mig_status.runs.get(f"fp32/{key}")),
                                       Run.load(mig_status.runs.get(f"bf16/{key}")),
                                       label=f"{key}/", cross_device=cross, gate_unmatched=True,
                                       reference_noise=_noise_runs(orig_status, key)))
    _compare_optimizers(comparison, notes, orig_status, mig_status, cross)
    policy_checks = _training(comparison, notes, orig_status.train, mig_status.train, cross, ctx)
    own = mig_status.own_batch_sha256
    differing = [s for s in own if own[s] != mig_status.batch_sha256.get(s)]
    if differing:
        notes.append(f"the migrated make_batch gives different batches (steps {', '.join(differing)}); "
                     "the original's batches were used")
    from ..comparison.randomness import dropout_check

    dropout_row, dropout_notes = dropout_check(orig_status.dropout, mig_status.dropout,
                                               real_npu="torch_npu" in mig_status.layers)
    notes += dropout_notes
    from ..comparison.built_state import built_check

    if (built_row := built_check(orig_status.built, mig_status.built)) is not None:
        policy_checks += (built_row,)
    from ..comparison.fused_args import fused_args_check

    if (fused_row := fused_args_check(orig_status.module_eps, mig_status.fused_norms)) is not None:
        policy_checks += (fused_row,)
    if dropout_row is not None:
        policy_checks += (dropout_row,)
    elif orig_status.dropout_active:
        notes.append("dropout still active after make_model(dropout=0.0): " + ", ".join(orig_status.dropout_active))
    ctx.manifest.update({
        "weights_sha256": orig_status.weights_sha256,
        "batch_sha256": dict(orig_status.batch_sha256),
        "migrated_weights_sha256": mig_status.weights_sha256,
        "determinism": {"original": dict(orig_status.manifest), "migrated": dict(mig_status.manifest)},
        "devices": {"original": orig_status.device, "migrated": mig_status.device},
    })
    return comparison, notes, policy_checks, dropout_row


def _noise_runs(orig_status: SideStatus, key: str) -> list[Run]:
    """The original's stochastically rounded bf16 runs of this step (none from an older recording)."""
    runs = []
    sample = 0
    while (run_dir := orig_status.runs.get(f"{noise_run(sample)}/{key}")) is not None:
        runs.append(required_run(run_dir, f"original {noise_run(sample)}/{key}"))
        sample += 1
    return runs


def _compare_optimizers(comparison: Comparison, notes: list[str], orig_status: SideStatus, mig_status: SideStatus,
                        cross: bool) -> None:
    opt_o, opt_m = orig_status.optimizer, mig_status.optimizer
    if opt_o and opt_m:
        comparison.extend(compare_optimizer(required_run(opt_o.dir, "original optimizer"),
                                            required_run(opt_m.dir, "migrated optimizer"), cross_device=cross))
        notes.append(f"optimizer in isolation: {opt_m.name} (migrated) vs {opt_o.name} (original), "
                     "same fp32 grads, fp32 master params")
    elif opt_o or opt_m:
        notes.append("make_optimizer exists on one side only: optimizer not compared")


def _first_op(result: StageResult, comparison: Comparison, ctx: StageContext, orig_status: SideStatus,
              mig_status: SideStatus) -> StageResult:
    """Name the first divergent op inside the failing module (or the optimizers' argument diff)."""
    from ..localisation import ops as L

    target = L.target_of(comparison.verdicts)
    if target is None:
        return result
    if target.get("optimizer"):
        text = L.optimizer_cause(target, orig_status, mig_status)
        row = None
    else:
        ctx.say(f"S1: op-level trace inside {target['module']} (step {target['step']}, {target['policy']}) "
                       "on both sides")
        traced = L.run_traces(ctx.opts, ctx.original, ctx.migrated, ctx.work, ctx.shared, target)
        if isinstance(traced, str):
            return replace(result, notes=result.notes + (traced,))
        found = L.first_divergent_op(traced[0], traced[1], target["policy"])
        text = L.describe(found, target["module"])
        row = {"check": f"first divergent op inside {target['module']}", **{k: v for k, v in found.items() if k != "note"}}
        if found.get("migrated_op"):
            row.update(status=Verdict.FAIL, metric=f"rel_l2 ({target['policy']})", worst=found["rel_l2"],
                       threshold=L.DIVERGES[target["policy"]],
                       worst_tensor=f"{found['migrated_op']} (migrated) vs {found['original_op']} (original)",
                       message=L.message(found))
        else:
            row.update(status=Verdict.WARN, message=found.get("note", ""))
    if not text:
        return result
    first = f"{result.first_divergence}; {text}" if result.first_divergence else text
    return replace(result, first_divergence=first, checks=result.checks + ((row,) if row else ()))


def _training(comparison: Comparison, notes: list[str], train_o: Mapping[str, TrainingFacts],
              train_m: Mapping[str, TrainingFacts], cross: bool, ctx: StageContext) -> tuple[CheckRow, ...]:
    """The k-step training comparison and each side's precision policy (data, then a check row per run)."""
    from ..comparison.compare_train import compare_training, training_note
    from ..comparison.policy import compare_policies, describe

    if not train_o or not train_m:
        return ()
    golden = required_run(train_o["fp32"].dir, "original fp32 training")
    reference, target_fp32, target_bf16 = (Run.load(facts.dir if (facts := t.get(p)) is not None else None)
                                           for t, p in ((train_o, "bf16"), (train_m, "fp32"), (train_m, "bf16")))
    golden_noise, reference_noise = (Run.load(facts.dir if (facts := train_o.get(p + NOISE_SUFFIX)) is not None else None)
                                     for p in ("fp32", "bf16"))
    comparison.extend(compare_training(golden, reference, target_fp32, target_bf16, cross_device=cross,
                                       golden_noise=golden_noise, reference_noise=reference_noise))
    note = training_note(train_o, train_m)
    if note:
        notes.append(note)
    ctx.manifest["precision_policy"] = {side: {p: describe(facts) for p, facts in t.items() if p in ("fp32", "bf16")}
                                           for side, t in (("original", train_o), ("migrated", train_m))}
    rows = [compare_policies(train_o.get(p), train_m.get(p), p) for p in ("fp32", "bf16")]
    return tuple(r for r in rows if r is not None)
