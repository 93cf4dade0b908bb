"""S1 parity-1card (parent side): the original side (G fp32, R bf16) and the migrated side (T32, T16) as
two concurrent children, the per-tensor and k-step comparisons, the precision policies, and the first
divergent op when a module fails."""

from __future__ import annotations

import os
import time
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from ..records import Side, SideJob, SideStatus, Status
from .compare import FAIL, Comparison, Run, compare_optimizer, compare_runs
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


def _s1_jobs(opts: Options, original: str, migrated: str, work: str, shared: str) -> tuple[SideJob, SideJob]:
    def job(side: Side, tree: str, out: str) -> SideJob:
        device = opts.device if (opts.record if side == "original" else opts.compare) else None
        return SideJob(side=side, tree=tree, out=out, seed=opts.seed, threads=opts.threads, entry=opts.entry,
                       steps=tuple(opts.steps), policies=("fp32", "bf16"), bf16_policy=opts.bf16_policy,
                       shared=shared, max_bytes=opts.max_bytes, wait_timeout=opts.timeout, device=device)

    return job("original", original, shared), job("migrated", migrated, os.path.join(work, "s1", "migrated"))


def run_s1(opts: Options, original: str, migrated: str, work: str, ctx: StageContext,
           progress: Progress = None) -> StageResult:
    from . import launcher

    t0 = time.monotonic()
    shared = ctx.shared
    orig_job, mig_job = _s1_jobs(opts, original, migrated, work, shared)
    env = launcher.child_env(opts.seed, opts.threads)
    children = []
    if ctx.recorded is None:
        _say(progress, "S1: original side (G fp32, R bf16) and migrated side (T) in two child processes")
        children.append(launcher.start(orig_job, "original", env, opts.timeout))
    else:
        _say(progress, f"S1: migrated side against the recorded reference {opts.compare}")
    children.append(launcher.start(mig_job, "migrated", env, opts.timeout))
    results = [launcher.wait(c, SideStatus) for c in children]
    by_name = {r.name: r for r in results}
    orig_status = ctx.recorded if ctx.recorded is not None else by_name["original"].status
    mig_res = by_name["migrated"]
    mig_status = mig_res.status
    ctx.layers = {"original": dict(orig_status.layers), "migrated": dict(mig_status.layers)}
    bench = {"seconds": round(time.monotonic() - t0, 2)}
    for r in results:
        bench[f"{r.name}_seconds"] = round(r.seconds, 2)

    for side, res in (("original", None if ctx.recorded is not None else by_name["original"]), ("migrated", mig_res)):
        failure: Status | None = None
        if res is not None:
            failure = res.failure()
        elif not orig_status.ok:  # the recorded reference
            failure = orig_status
        if failure is None:
            continue
        phase = failure.phase
        if phase == "skipped":
            continue
        if phase in ("entry", "harness"):
            return StageResult("S1", "error", reason=f"{side} side could not run: {_failure_text(failure)}",
                               bench=bench, summary=could_not_run(side, failure))
        if side == "original":  # nothing to compare against: no verdict on the migration (exit 2, never 1)
            return StageResult("S1", "error", summary="could not run: the original program fails",
                               reason=f"could not run: original fails {_failure_text(failure)}", bench=bench)
        return StageResult("S1", FAIL, summary=f"the {side} program failed",
                           reason=f"{side} program failed {_failure_text(failure)}",
                           first_divergence=_crash_module(failure) if side == "migrated" else None, bench=bench)

    comparison = Comparison()
    cross = orig_status.device != mig_status.device
    notes: list[str] = []
    if cross:
        notes.append(f"cross-device comparison ({orig_status.device} vs {mig_status.device}): "
                     "fp32 logic bounds x10 (to calibrate on hardware)")
    for step in opts.steps:
        key = f"step{step}"
        G = _required_run(orig_status.runs.get(f"fp32/{key}"), f"original fp32/{key}")
        R = Run.load(orig_status.runs.get(f"bf16/{key}"))
        T32 = Run.load(mig_status.runs.get(f"fp32/{key}"))
        T16 = Run.load(mig_status.runs.get(f"bf16/{key}"))
        comparison.extend(compare_runs(G, R, T32, T16, label=f"{key}/", cross_device=cross, gate_unmatched=True))
    opt_o, opt_m = orig_status.optimizer, mig_status.optimizer
    if opt_o and opt_m:
        comparison.extend(compare_optimizer(_required_run(opt_o.dir, "original optimizer"),
                                            _required_run(opt_m.dir, "migrated optimizer"), cross_device=cross))
        notes.append(f"optimizer in isolation: {opt_m.name} (migrated) vs {opt_o.name} (original), "
                     "same fp32 grads, fp32 master params")
    elif opt_o or opt_m:
        notes.append("make_optimizer exists on one side only: optimizer not compared")
    policy_checks = _training(comparison, notes, orig_status.train, mig_status.train, cross, ctx)
    own = mig_status.own_batch_sha256
    shared_hash = mig_status.batch_sha256
    differing = [s for s in own if own[s] != shared_hash.get(s)]
    if differing:
        notes.append(f"the migrated make_batch gives different batches (steps {', '.join(differing)}); "
                     "the original's batches were used")
    from .randomness import NOT_COMPARABLE, dropout_check

    dropout_row, dropout_notes = dropout_check(orig_status.dropout, mig_status.dropout,
                                               real_npu="torch_npu" in mig_status.layers)
    notes += dropout_notes
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
    bench["compare_seconds"] = round(time.monotonic() - t0 - max(r.seconds for r in results), 2)
    bench["seconds"] = round(time.monotonic() - t0, 2)  # the stage's time includes the comparison
    result = numeric_stage("S1", comparison, bench=bench, notes=notes, extra_checks=policy_checks,
                           extra_summary=f"{len(opts.steps)} step(s), bf16 policy {opts.bf16_policy}")
    if dropout_row is not None and dropout_row["status"] == NOT_COMPARABLE:  # neither pass nor fail
        return replace(result, status="not_run", summary=dropout_row["message"])
    if result.status == FAIL:
        result = _first_op(result, comparison, opts, original, migrated, work, shared, orig_status, mig_status,
                           progress)
        result = replace(result, bench=dict(result.bench, seconds=round(time.monotonic() - t0, 2)))
    return result


def _first_op(result: StageResult, comparison: Comparison, opts: Options, original: str, migrated: str, work: str,
              shared: str, orig_status: SideStatus, mig_status: SideStatus, progress: Progress) -> StageResult:
    """Name the first divergent op inside the failing module (or the optimizers' argument diff)."""
    from . import op_localise as L

    target = L.target_of(comparison.verdicts)
    if target is None:
        return result
    if target.get("optimizer"):
        text = L.optimizer_cause(target, orig_status, mig_status)
        row = None
    else:
        _say(progress, f"S1: op-level trace inside {target['module']} (step {target['step']}, {target['policy']}) "
                       "on both sides")
        traced = L.run_traces(opts, original, migrated, work, shared, target)
        if isinstance(traced, str):
            return replace(result, notes=result.notes + (traced,))
        found = L.first_divergent_op(traced[0], traced[1], target["policy"])
        text = L.describe(found, target["module"])
        row = {"check": f"first divergent op inside {target['module']}", **{k: v for k, v in found.items() if k != "note"}}
        if found.get("migrated_op"):
            row.update(status=FAIL, metric=f"rel_l2 ({target['policy']})", worst=found["rel_l2"],
                       threshold=L.DIVERGES[target["policy"]],
                       worst_tensor=f"{found['migrated_op']} (migrated) vs {found['original_op']} (original)",
                       message="; ".join(found["argument_diff"]) or "same semantic arguments")
        else:
            row.update(status="warn", message=found.get("note", ""))
    if not text:
        return result
    first = f"{result.first_divergence}; {text}" if result.first_divergence else text
    return replace(result, first_divergence=first, checks=result.checks + ((row,) if row else ()))


def _training(comparison: Comparison, notes: list[str], train_o: Mapping[str, Mapping[str, Any]],
              train_m: Mapping[str, Mapping[str, Any]], cross: bool, ctx: StageContext) -> tuple[dict[str, Any], ...]:
    """The k-step training comparison and each side's precision policy (data, then a check row per run)."""
    from .compare_train import compare_training, training_note
    from .policy import compare_policies, describe

    if not train_o or not train_m:
        return ()
    G = _required_run(train_o["fp32"]["dir"], "original fp32 training")
    R, T32, T16 = (Run.load((t.get(p) or {}).get("dir")) for t, p in ((train_o, "bf16"), (train_m, "fp32"),
                                                                      (train_m, "bf16")))
    comparison.extend(compare_training(G, R, T32, T16, cross_device=cross))
    note = training_note(train_o, train_m)
    if note:
        notes.append(note)
    ctx.manifest["precision_policy"] = {side: {p: describe(t.get(p)) for p in t if isinstance(t.get(p), dict)}
                                           for side, t in (("original", train_o), ("migrated", train_m))}
    rows = [compare_policies(train_o.get(p), train_m.get(p), p) for p in ("fp32", "bf16")]
    return tuple(r for r in rows if r is not None)
