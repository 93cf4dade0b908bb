"""S0–S3 orchestration and gating (parent side; the programs run only in children).

Each stage is gated on the one before (a failing or erroring stage leaves the later ones
"not run" unless ``force``). S1 runs the original side (G, R) and the migrated side (T32, T16)
as two concurrent children; S0 is one child on the fake process group; S2 and S3 are N ranks
through torchrun, each rank running the unsharded reference on its own micro-batch and the
parallel variants (DDP, FSDP2 / TP, EP).
"""

from __future__ import annotations

import json
import os
import shutil
import tarfile
import tempfile
import time
from collections.abc import Mapping
from typing import Any, Literal, TypeVar

from .. import records
from ..records import ParallelJob, PlanJob, PlanStatus, RankStatus, Side, SideJob, SideStatus, Status
from .compare import (
    FAIL,
    Comparison,
    Run,
    compare_optimizer,
    compare_runs,
    worst_status,
)
from .options import ALL_STAGES, Options
from .results import StageResult, ValidationResult
from .stage_common import (
    MigrateStep,
    Progress,
    ValidationSetupError,
    _crash_module,
    _failure_text,
    _migrate,
    _say,
    numeric_stage,
)

__all__ = ["ValidationSetupError", "run"]


def _s1_jobs(opts: Options, original: str, migrated: str, work: str, shared: str) -> tuple[SideJob, SideJob]:
    def job(side: Side, tree: str, out: str) -> SideJob:
        return SideJob(side=side, tree=tree, out=out, seed=opts.seed, threads=opts.threads, entry=opts.entry,
                       steps=tuple(opts.steps), policies=("fp32", "bf16"), bf16_policy=opts.bf16_policy,
                       shared=shared, max_bytes=opts.max_bytes, wait_timeout=opts.timeout)

    return job("original", original, shared), job("migrated", migrated, os.path.join(work, "s1", "migrated"))


def run_s1(opts: Options, original: str, migrated: str, work: str, ctx: dict[str, Any],
           progress: Progress = None) -> StageResult:
    from . import launcher

    t0 = time.monotonic()
    shared = ctx["shared"]
    orig_job, mig_job = _s1_jobs(opts, original, migrated, work, shared)
    env = launcher.child_env(opts.seed, opts.threads)
    children = []
    if not ctx.get("recorded"):
        _say(progress, "S1: original side (G fp32, R bf16) and migrated side (T) in two child processes")
        children.append(launcher.start(orig_job, "original", env, opts.timeout))
    else:
        _say(progress, f"S1: migrated side against the recorded reference {opts.compare}")
    children.append(launcher.start(mig_job, "migrated", env, opts.timeout))
    results = [launcher.wait(c, SideStatus) for c in children]
    by_name = {r.name: r for r in results}
    orig_status: SideStatus = ctx["recorded_status"] if ctx.get("recorded") else by_name["original"].status
    mig_res = by_name["migrated"]
    mig_status = mig_res.status
    ctx["layers"] = {"original": dict(orig_status.layers), "migrated": dict(mig_status.layers)}
    bench = {"seconds": round(time.monotonic() - t0, 2)}
    for r in results:
        bench[f"{r.name}_seconds"] = round(r.seconds, 2)

    for side, res in (("original", None if ctx.get("recorded") else by_name["original"]), ("migrated", mig_res)):
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
                               bench=bench, summary=f"{side} side could not run")
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
    if orig_status.dropout_active:
        notes.append("dropout still active after make_model(dropout=0.0): " + ", ".join(orig_status.dropout_active))
    ctx["manifest"].update({
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
    if result.status == FAIL:
        result = _first_op(result, comparison, opts, original, migrated, work, shared, orig_status, mig_status,
                           progress)
        result = _replace(result, bench=dict(result.bench, seconds=round(time.monotonic() - t0, 2)))
    return result


def _first_op(result: StageResult, comparison: Comparison, opts: Options, original: str, migrated: str, work: str,
              shared: str, orig_status: SideStatus, mig_status: SideStatus, progress: Progress) -> StageResult:
    """Name the first divergent op inside the failing module (or the optimizers' argument diff)."""
    from . import op_localise as L

    target = L.target_of(comparison.verdicts)
    if target is None:
        return result
    if target.get("optimizer"):
        text = L.optimizer_diff(orig_status.optimizer, mig_status.optimizer)
        row = None
    else:
        _say(progress, f"S1: op-level trace inside {target['module']} (step {target['step']}, {target['policy']}) "
                       "on both sides")
        traced = L.run_traces(opts, original, migrated, work, shared, target)
        if isinstance(traced, str):
            return _replace(result, notes=result.notes + (traced,))
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
    return _replace(result, first_divergence=first, checks=result.checks + ((row,) if row else ()))


def _training(comparison: Comparison, notes: list[str], train_o: Mapping[str, Mapping[str, Any]],
              train_m: Mapping[str, Mapping[str, Any]], cross: bool, ctx: dict[str, Any]) -> tuple[dict[str, Any], ...]:
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
    ctx["manifest"]["precision_policy"] = {side: {p: describe(t.get(p)) for p in t if isinstance(t.get(p), dict)}
                                           for side, t in (("original", train_o), ("migrated", train_m))}
    rows = [compare_policies(train_o.get(p), train_m.get(p), p) for p in ("fp32", "bf16")]
    return tuple(r for r in rows if r is not None)


# ------------------------------------------------------------------------------------ S0, S2, S3
def run_s0(opts: Options, migrated: str, work: str, ctx: dict[str, Any], progress: Progress = None) -> StageResult:
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
    ctx.setdefault("layers", {}).setdefault("migrated", dict(status.layers))
    checks = tuple(dict(c) for c in status.checks)
    bench.update(status.bench)
    ctx["declared_stages"] = list(status.declared)
    st = worst_status(c["status"] for c in checks) if checks else "error"
    failed = [c for c in checks if c["status"] == FAIL]
    reason = "; ".join(f"{c['check']}: {c.get('message', '')}" for c in failed[:3]) or None
    if not checks:
        reason = _failure_text(status) if res.statuses else "no plan checks ran"
    return StageResult("S0", st, summary=status.summary, reason=reason, checks=checks, bench=bench,
                       notes=status.notes)


def run_parallel_stage(sid: str, opts: Options, migrated: str, work: str, ctx: dict[str, Any],
                       progress: Progress = None) -> StageResult:
    """S2 (data parallel: DDP, FSDP2) or S3 (model parallel: TP, EP) through torchrun."""
    from . import launcher

    variants = list(opts.dp_variants if sid == "S2" else opts.mp_variants)
    nprocs = opts.world_size * opts.nnodes
    declared = ctx.get("declared_stages")  # known when S0 ran: skip a launch that has nothing to run
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
            return StageResult(sid, "error", summary="could not run", bench=bench,
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


def _required_run(run_dir: str | None, what: str) -> Run:
    run = Run.load(run_dir)
    if run is None:
        raise RuntimeError(f"the {what} run left no dump (status names no folder)")
    return run


# ------------------------------------------------------------------------------------ record / compare
def _pack(src: str, dest: str) -> None:
    if dest.endswith((".tar", ".tar.gz", ".tgz")):
        os.makedirs(os.path.dirname(os.path.abspath(dest)) or ".", exist_ok=True)
        mode: Literal["w:gz", "w"] = "w:gz" if dest.endswith(("gz", "tgz")) else "w"
        with tarfile.open(dest, mode) as tar:
            tar.add(src, arcname="reference")
    else:
        if os.path.exists(dest):
            shutil.rmtree(dest)
        shutil.copytree(src, dest)


def _unpack(src: str, dest: str) -> str:
    if os.path.isdir(src):
        shutil.copytree(src, dest)
        return dest
    with tarfile.open(src) as tar:
        tar.extractall(os.path.dirname(dest), filter="data")
    extracted = os.path.join(os.path.dirname(dest), "reference")
    if extracted != dest:
        os.replace(extracted, dest)
    return dest


def _read_recorded(archive: str, shared: str) -> SideStatus:
    """The reference side's status saved by ``--record``, its paths pointed at the unpacked copy."""
    path = os.path.join(shared, "status.json")
    try:
        with open(path, encoding="utf-8") as fh:
            data = json.load(fh)
        root = data.get("shared_root", shared) if isinstance(data, dict) else shared
        return records.from_json(_relocate(data, root, shared), SideStatus, path)
    except (OSError, ValueError) as exc:  # RecordError is a ValueError
        raise ValidationSetupError(f"{archive}: not a reference recorded by this version of migrate validate "
                                   f"({exc})") from None


def _relocate(status: Any, old_root: str, new_root: str) -> Any:
    """Recorded statuses hold absolute paths of the recording host: point them at the unpacked copy."""
    def fix(value):
        if isinstance(value, str) and value.startswith(old_root):
            return new_root + value[len(old_root):]
        if isinstance(value, dict):
            return {k: fix(v) for k, v in value.items()}
        if isinstance(value, list):
            return [fix(v) for v in value]
        return value

    return fix(status)


# ------------------------------------------------------------------------------------ entry point
def run(opts: Options, progress: Progress = None, migrate: MigrateStep | None = None) -> ValidationResult:
    """Run the selected stages; never raises for a failing program (that is a result). ``migrate`` makes
    the migrated tree when ``opts.migrated`` is not given (the api passes `migrate fix` in)."""
    original = os.path.abspath(opts.original)
    if not os.path.isdir(original):
        raise ValidationSetupError(f"{opts.original}: not a directory")
    unknown = [s for s in opts.stages if s not in ALL_STAGES]
    if unknown:
        raise ValidationSetupError(f"unknown stage(s) {', '.join(unknown)}; choose from {', '.join(ALL_STAGES)}")
    if opts.record and opts.compare:
        raise ValidationSetupError("--record and --compare exclude each other")
    if opts.bench and (opts.script or opts.record):
        raise ValidationSetupError("--bench times the protocol's stages: not with --script or --record")
    if opts.bench and (opts.bench_steps < 1 or opts.repeats < 1 or opts.bench_warmup < 0):
        raise ValidationSetupError("--bench-steps and --repeats must be >= 1")
    if opts.script:
        from .script_mode import run_script_mode

        return run_script_mode(opts, progress, migrate)
    work = os.path.abspath(opts.work_dir) if opts.work_dir else tempfile.mkdtemp(prefix="migrate-validate-")
    os.makedirs(work, exist_ok=True)
    ctx: dict[str, Any] = {"manifest": {"seed": opts.seed, "steps": list(opts.steps), "bf16_policy": opts.bf16_policy,
                                        "threads": opts.threads, "world_size": opts.world_size * opts.nnodes,
                                        "plan_world_size": opts.plan_world_size}}
    notes: list[str] = []
    try:
        shared = os.path.join(work, "s1", "original")
        if opts.compare:
            if not os.path.exists(opts.compare):
                raise ValidationSetupError(f"{opts.compare}: no such recorded reference")
            shared = _unpack(opts.compare, os.path.join(work, "s1", "recorded"))
            recorded = _read_recorded(opts.compare, shared)
            if not recorded.ok:
                raise ValidationSetupError(f"{opts.compare}: the recorded reference side had failed")
            steps = tuple(int(s) for s in recorded.batch_sha256)
            if steps and tuple(opts.steps) != steps:
                opts = _replace(opts, steps=steps)
            ctx.update(recorded=True, recorded_status=recorded)
            notes.append(f"reference side recorded elsewhere ({opts.compare}; device {recorded.device})")
        ctx["shared"] = shared

        if opts.record:
            return _record(opts, original, work, ctx, progress)

        migrated = os.path.abspath(opts.migrated) if opts.migrated else _migrate(original, work, progress, migrate)
        if not os.path.isdir(migrated):
            raise ValidationSetupError(f"{opts.migrated}: not a directory")
        if not opts.migrated:
            kept = opts.keep_work_dir or opts.work_dir
            notes.append(f"migrated copy written by `migrate fix --target npu --out {migrated}`"
                         + ("" if kept else " (temporary: give --work-dir to keep it)"))

        stages: list[StageResult] = []
        blocked: str | None = None
        for sid in ALL_STAGES:
            if sid not in opts.stages:
                stages.append(StageResult(sid, "not_run", reason="not selected (--stages)"))
                continue
            if blocked:
                stages.append(StageResult(sid, "not_run", reason=f"{blocked} did not pass (--force runs it anyway)"))
                continue
            if sid == "S0":
                result = run_s0(opts, migrated, work, ctx, progress)
            elif sid == "S1":
                result = run_s1(opts, original, migrated, work, ctx, progress)
            else:
                result = run_parallel_stage(sid, opts, migrated, work, ctx, progress)
            if opts.bench and sid != "S0" and result.status in ("pass", "warn", "fail"):
                from .benchstage import bench_stage  # only with --bench: nothing is timed otherwise

                perf = bench_stage(sid, opts, original, migrated, work, ctx, progress)
                if perf is not None:
                    result = _replace(result, bench=dict(result.bench, perf=perf))
            stages.append(result)
            if result.status in ("fail", "error") and not opts.force:
                blocked = sid
        if opts.export_msprobe:
            from .msprobe_export import export_tree

            count = export_tree(work, opts.export_msprobe)
            notes.append(f"msprobe layout: {count} dump(s) under {opts.export_msprobe}")
        if opts.keep_work_dir or opts.work_dir:
            notes.append(f"dumps kept in {work}")
        bench: dict[str, Any] = {}
        if opts.bench:
            from .benchstage import scaling

            bench = {"scaling": scaling(stages, opts)}
        return ValidationResult(original=original, migrated=migrated, stages=tuple(stages),
                                layers=ctx.get("layers", {}), manifest=ctx["manifest"],
                                work_dir=work if (opts.keep_work_dir or opts.work_dir) else None,
                                notes=tuple(notes), bench=bench)
    finally:
        if not (opts.keep_work_dir or opts.work_dir):
            shutil.rmtree(work, ignore_errors=True)


_Record = TypeVar("_Record", Options, StageResult, SideStatus)


def _replace(record: _Record, **changes) -> _Record:
    from dataclasses import replace

    return replace(record, **changes)


def _record(opts: Options, original: str, work: str, ctx: dict[str, Any], progress: Progress) -> ValidationResult:
    """``--record``: run the reference side only and save weights, batches, dumps and manifest."""
    from . import launcher

    shared = ctx["shared"]
    orig_job, _ = _s1_jobs(opts, original, original, work, shared)
    _say(progress, f"recording the reference side (G fp32, R bf16) into {opts.record}")
    res = launcher.wait(launcher.start(orig_job, "original", launcher.child_env(opts.seed, opts.threads), opts.timeout),
                        SideStatus)
    failure = res.failure()
    status = res.status
    layers = {"original": dict(status.layers)}
    if failure is not None:
        verdict = "error" if failure.phase in ("entry", "harness") else FAIL
        stage = StageResult("S1", verdict, summary="reference side failed", reason=f"original {_failure_text(failure)}")
    else:
        records.write(_replace(status, shared_root=shared), os.path.join(shared, "status.json"))
        assert opts.record is not None  # _record runs only with --record
        _pack(shared, opts.record)
        stage = StageResult("S1", "not_run", summary="reference recorded",
                            reason=f"reference side recorded to {opts.record}; run `migrate validate --compare "
                                   f"{opts.record}` where the migrated side runs",
                            bench={"seconds": round(res.seconds, 2)})
    ctx["manifest"].update(weights_sha256=status.weights_sha256, batch_sha256=dict(status.batch_sha256),
                           determinism={"original": dict(status.manifest)}, devices={"original": status.device})
    others = [StageResult(s, "not_run", reason="--record runs the reference side only") for s in ("S0", "S2", "S3")]
    stages = (others[0], stage, *others[1:])
    return ValidationResult(original=original, migrated=None, stages=stages, layers=layers, manifest=ctx["manifest"],
                            notes=(f"reference recorded to {opts.record}",), mode="record")
