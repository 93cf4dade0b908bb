"""S0–S3 as a registry: which module runs each stage, per way of validating, and the one gating loop.

Every stage is ``run(ctx: StageContext) -> StageResult`` (:mod:`..stage_kit`). A :class:`Mode` maps stage
ids to those functions: :data:`PROTOCOL` (a ``validate.py`` at the tree root: :mod:`.s0`, :mod:`.s1`,
:mod:`.parallel` for S2 and S3) and :data:`SCRIPT` (an unmodified training script: :mod:`.script`).
Each stage is gated on the one before (a failing or erroring stage leaves the later ones "not run"
unless ``force``); ``--bench`` times each stage that compared something (:mod:`.bench`); ``--record``
runs the reference side only (:mod:`.recorded`).
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from ...verdict import BLOCKING, GRADED, Verdict
from .. import launcher
from ..options import ALL_STAGES, Options
from ..results import StageResult, ValidationResult
from ..stage_kit import MigrateStep, Progress, StageContext, ValidationSetupError, migrate_tree
from . import parallel, s0, s1, script
from .recorded import read_recorded, record_result, unpack

__all__ = ["PROTOCOL", "SCRIPT", "Mode", "StageRunner", "ValidationSetupError", "run"]

StageRunner = Callable[[StageContext], StageResult]


@dataclass(frozen=True)
class Mode:
    """One way of validating: the stage each id runs, and why an id without one does not run."""

    name: str  # the result's ``mode``
    stages: Mapping[str, StageRunner]
    unavailable: str = ""  # the reason given for a stage id this mode has no runner for
    always: tuple[str, ...] = ()  # stages run whatever --stages says (script mode's S1: the smoke check)


PROTOCOL = Mode("protocol", {"S0": s0.run, "S1": s1.run, "S2": parallel.run, "S3": parallel.run})
SCRIPT = Mode("script", {"S1": script.run, "S2": script.run_s2}, always=("S1",),
              unavailable="script mode: needs the validate.py protocol (make_model, ...; the template is in the notes)")


# ------------------------------------------------------------------------------------ entry point
def _on_node_zero() -> bool:
    from ..multinode.lead import current

    return current() is not None


def run(opts: Options, progress: Progress = None, migrate: MigrateStep | None = None) -> ValidationResult:
    """Run the selected stages; never raises for a failing program (that is a result). ``migrate`` makes
    the migrated tree when ``opts.migrated`` is not given (the api passes `migrate fix` in)."""
    original = os.path.abspath(opts.original)
    if opts.nnodes > 1 and not _on_node_zero():  # across nodes: node 0 runs this with the others joined
        from ..multinode.follow import run_across_nodes

        return run_across_nodes(opts, progress, migrate, run)
    _check_options(opts, original)
    work = os.path.abspath(opts.work_dir) if opts.work_dir else tempfile.mkdtemp(prefix="migrate-validate-")
    os.makedirs(work, exist_ok=True)
    keep = bool(opts.work_dir) if opts.script else bool(opts.keep_work_dir or opts.work_dir)
    try:
        with launcher.warm_starts(launcher.child_env(opts.seed, opts.threads)):
            if opts.script:
                return _run_script(opts, original, work, progress, migrate)
            return _run_protocol(opts, original, work, keep, progress, migrate)
    finally:
        if not keep:
            shutil.rmtree(work, ignore_errors=True)


def _check_options(opts: Options, original: str) -> None:
    """Every setup error that needs no child: before any child starts or any folder is made."""
    if not os.path.isdir(original):
        raise ValidationSetupError(f"{opts.original}: not a directory")
    unknown = [s for s in opts.stages if s not in ALL_STAGES]
    if unknown:
        raise ValidationSetupError(f"unknown stage(s) {', '.join(unknown)}; choose from {', '.join(ALL_STAGES)}")
    if opts.record and opts.compare:
        raise ValidationSetupError("--record and --compare exclude each other")
    if opts.device is not None:
        from ..device_select import select_device

        select_device(opts.device, record=bool(opts.record), compare=bool(opts.compare))
    if opts.bench and (opts.script or opts.record):
        raise ValidationSetupError("--bench times the protocol's stages: not with --script or --record")
    if opts.bench and (opts.bench_steps < 1 or opts.repeats < 1 or opts.bench_warmup < 0):
        raise ValidationSetupError("--bench-steps and --repeats must be >= 1")
    if not opts.script and not opts.entry and not os.path.isfile(os.path.join(original, "validate.py")):
        raise ValidationSetupError(f"{original}: no validate.py at the tree root (give --entry module:object or "
                                   "--script)")


def _migrated_tree(opts: Options, original: str, work: str, progress: Progress, migrate: MigrateStep | None) -> str:
    migrated = os.path.abspath(opts.migrated) if opts.migrated else migrate_tree(original, work, progress, migrate)
    if not os.path.isdir(migrated):
        raise ValidationSetupError(f"{opts.migrated}: not a directory")
    return migrated


def _run_script(opts: Options, original: str, work: str, progress: Progress,
                migrate: MigrateStep | None) -> ValidationResult:
    migrated = _migrated_tree(opts, original, work, progress, migrate)
    ctx = StageContext(opts=opts, original=original, migrated=migrated, work=work, progress=progress,
                       shared=os.path.join(work, "script", "shared"),
                       manifest={"seed": opts.seed, "curve_steps": opts.curve_steps})
    stages = run_stages(SCRIPT, ctx)
    return ValidationResult(original=original, migrated=migrated, stages=stages, layers=ctx.layers,
                            notes=(*ctx.import_notes(), script.PROTOCOL_TEMPLATE), manifest=ctx.manifest,
                            work_dir=work if opts.work_dir else None, mode=SCRIPT.name)


def _run_protocol(opts: Options, original: str, work: str, keep: bool, progress: Progress,
                  migrate: MigrateStep | None) -> ValidationResult:
    manifest: dict[str, Any] = {"seed": opts.seed, "steps": list(opts.steps), "bf16_policy": opts.bf16_policy,
                                "threads": opts.threads, "world_size": opts.world_size * opts.nnodes,
                                "plan_world_size": opts.plan_world_size}
    notes: list[str] = []
    ctx = StageContext(opts=opts, original=original, migrated=original, work=work, progress=progress,
                       shared=os.path.join(work, "s1", "original"), manifest=manifest)
    if opts.compare:
        _use_recorded(ctx, notes)
    if ctx.opts.record:
        return record_result(ctx)
    ctx.migrated = _migrated_tree(ctx.opts, original, work, progress, migrate)
    if not opts.migrated:
        notes.append(f"migrated copy written by `migrate fix --target npu --out {ctx.migrated}`"
                     + ("" if keep else " (temporary: give --work-dir to keep it)"))
    stages = run_stages(PROTOCOL, ctx)
    if opts.export_msprobe:
        from ..interop.msprobe_export import export_tree

        count = export_tree(work, opts.export_msprobe)
        notes.append(f"msprobe layout: {count} dump(s) under {opts.export_msprobe}")
    notes += ctx.import_notes()
    if keep:
        notes.append(f"dumps kept in {work}")
    rows = None
    if opts.bench:
        from .bench import scaling

        rows = scaling(stages, opts)
    return ValidationResult(original=original, migrated=ctx.migrated, stages=stages,
                            layers=ctx.layers, manifest=ctx.manifest, work_dir=work if keep else None,
                            notes=tuple(notes), scaling=rows)


def _use_recorded(ctx: StageContext, notes: list[str]) -> None:
    """``--compare``: the reference side comes from the archive (unpacked into the work folder)."""
    archive = ctx.opts.compare
    assert archive is not None  # called only with --compare
    if not os.path.exists(archive):
        raise ValidationSetupError(f"{archive}: no such recorded reference")
    ctx.shared = unpack(archive, os.path.join(ctx.work, "s1", "recorded"))
    ctx.recorded = read_recorded(archive, ctx.shared)
    if not ctx.recorded.ok:
        raise ValidationSetupError(f"{archive}: the recorded reference side had failed")
    from ..reference_meta import check_meta

    ctx.manifest["reference"] = check_meta(archive, ctx.shared, ctx.original)
    steps = tuple(int(s) for s in ctx.recorded.batch_sha256)
    if steps and tuple(ctx.opts.steps) != steps:
        ctx.opts = replace(ctx.opts, steps=steps)
    notes.append(f"reference side recorded elsewhere ({archive}; device {ctx.recorded.device})")


def run_stages(mode: Mode, ctx: StageContext) -> tuple[StageResult, ...]:
    """Every stage id in order: run (gated on the one before), or not run with the reason."""
    stages: list[StageResult] = []
    blocked: str | None = None
    for sid in ALL_STAGES:
        runner = mode.stages.get(sid)
        if runner is None:
            stages.append(StageResult(sid, Verdict.NOT_RUN, reason=mode.unavailable))
            continue
        if sid not in ctx.opts.stages and sid not in mode.always:
            stages.append(StageResult(sid, Verdict.NOT_RUN, reason="not selected (--stages)"))
            continue
        if blocked:
            stages.append(StageResult(sid, Verdict.NOT_RUN, reason=f"{blocked} did not pass (--force runs it anyway)"))
            continue
        ctx.stage = sid
        result = runner(ctx)
        if ctx.opts.bench and result.status in GRADED:
            from . import bench  # only with --bench: nothing is timed otherwise

            result = bench.run(ctx, result)
        stages.append(result)
        if result.status in BLOCKING and not ctx.opts.force:
            blocked = sid
    return tuple(stages)
