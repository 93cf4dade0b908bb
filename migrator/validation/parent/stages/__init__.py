"""S0–S3 orchestration and gating (parent side; the programs run only in children).

Each stage is gated on the one before (a failing or erroring stage leaves the later ones
"not run" unless ``force``). The stages themselves: :mod:`.stage_s1` (S1), :mod:`.stage_parallel`
(S0, S2, S3); ``--record`` / ``--compare``: :mod:`.recorded`.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from dataclasses import replace
from typing import Any

from .options import ALL_STAGES, Options
from .recorded import _read_recorded, _record, _unpack
from .results import StageResult, ValidationResult
from .stage_common import MigrateStep, Progress, StageContext, ValidationSetupError, _migrate
from .stage_parallel import run_parallel_stage, run_s0
from .stage_s1 import run_s1

__all__ = ["ValidationSetupError", "run"]


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
    if opts.device is not None:
        from .device_select import select_device

        select_device(opts.device, record=bool(opts.record), compare=bool(opts.compare))
    if opts.bench and (opts.script or opts.record):
        raise ValidationSetupError("--bench times the protocol's stages: not with --script or --record")
    if opts.bench and (opts.bench_steps < 1 or opts.repeats < 1 or opts.bench_warmup < 0):
        raise ValidationSetupError("--bench-steps and --repeats must be >= 1")
    if opts.script:
        from .script_mode import run_script_mode

        return run_script_mode(opts, progress, migrate)
    if not opts.entry and not os.path.isfile(os.path.join(original, "validate.py")):  # before any child starts
        raise ValidationSetupError(f"{original}: no validate.py at the tree root (give --entry module:object or "
                                   "--script)")
    work = os.path.abspath(opts.work_dir) if opts.work_dir else tempfile.mkdtemp(prefix="migrate-validate-")
    os.makedirs(work, exist_ok=True)
    manifest: dict[str, Any] = {"seed": opts.seed, "steps": list(opts.steps), "bf16_policy": opts.bf16_policy,
                                "threads": opts.threads, "world_size": opts.world_size * opts.nnodes,
                                "plan_world_size": opts.plan_world_size}
    notes: list[str] = []
    try:
        shared = os.path.join(work, "s1", "original")
        recorded = None
        if opts.compare:
            if not os.path.exists(opts.compare):
                raise ValidationSetupError(f"{opts.compare}: no such recorded reference")
            shared = _unpack(opts.compare, os.path.join(work, "s1", "recorded"))
            recorded = _read_recorded(opts.compare, shared)
            if not recorded.ok:
                raise ValidationSetupError(f"{opts.compare}: the recorded reference side had failed")
            from .reference_meta import check_meta

            manifest["reference"] = check_meta(opts.compare, shared, original)
            steps = tuple(int(s) for s in recorded.batch_sha256)
            if steps and tuple(opts.steps) != steps:
                opts = replace(opts, steps=steps)
            notes.append(f"reference side recorded elsewhere ({opts.compare}; device {recorded.device})")
        ctx = StageContext(shared=shared, manifest=manifest, recorded=recorded)

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
                    result = replace(result, bench=dict(result.bench, perf=perf))
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
                                layers=ctx.layers, manifest=ctx.manifest,
                                work_dir=work if (opts.keep_work_dir or opts.work_dir) else None,
                                notes=tuple(notes), bench=bench)
    finally:
        if not (opts.keep_work_dir or opts.work_dir):
            shutil.rmtree(work, ignore_errors=True)
