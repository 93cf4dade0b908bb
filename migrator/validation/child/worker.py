"""Child-process entry point: ``python -m migrator.validation.child.worker JOB.json``.

The program under validation only ever runs here (never in the user's own process). A job is one
of the records of :mod:`migrator.validation.records`; its ``kind`` selects what runs:

* ``side``: S1 on one side (``original``: writes the shared bf16-rounded weights and batches, then
  G = fp32 and R = bf16 runs; ``migrated``: waits for them, then T32 and T16 runs), plus the
  isolated optimizer check when the protocol has ``make_optimizer``;
* ``plan``: S0 on the fake process group (:mod:`.plan`);
* ``parallel``: one rank of S2/S3 under ``torch.distributed.run`` (:mod:`.parallel`);
* ``script``: an unmodified training script under global hooks (:mod:`.script_hooks`);
* ``optrace``: one forward with the op tracer inside one module (:mod:`.optrace`);
* ``bench``: one benchmark repeat of one side (``--bench`` only; :mod:`.bench`).

Every job writes its status record (``records.STATUS_OF[kind]``) as ``status.json``
(``status_rank<r>.json`` for ranks) into its ``out`` folder: ``ok``, ``phase`` of a failure
(``entry`` = the protocol could not be loaded: exit 2; ``run`` = the program failed), a summary, the
active module stack, layers, manifest, and the kind's own results.
"""

from __future__ import annotations

import json
import os
import sys
import traceback
from collections.abc import Callable
from typing import Any

from .. import records
from ..records import (
    BenchJob,
    Failure,
    Job,
    ParallelJob,
    PlanJob,
    RecordError,
    ScriptJob,
    SideJob,
    Status,
    TraceJob,
)
from .dropout import SEEDS
from .handoff import READY, _mark_failed, _wait_for

DROPOUT = "dropout.json"  # the original side's dropout sites, next to the shared weights


def run_side(job: SideJob) -> dict[str, Any]:
    """S1 on one side. See the module docstring."""
    from .. import determinism
    from . import execute, protocol
    from .errors import describe, failure_phase
    from .recorder import Recorder

    side, tree, out = job.side, job.tree, job.out
    shared = job.shared  # original side's folder: weights + batches
    status: dict[str, Any] = {"ok": False, "side": side, "tree": tree, "runs": {}}
    timer = execute.Timer()
    recorder = None
    def versions(layers) -> None:
        import torch

        tnpu = sys.modules.get("torch_npu")
        status["manifest"].update(torch=torch.__version__, torch_npu=getattr(tnpu, "__version__", None) if tnpu else None)

    started = protocol.prepare(side, tree, job.entry, status, seed=job.seed, threads=job.threads,
                               extra=versions)
    if started is None:
        _mark_failed(side, shared)
        return status
    entry = started[0]
    status["entry"] = entry.source
    status["timings"] = {"setup": timer()}

    phase = "weights"
    own_sites = None
    try:

        bf16_policy, device, steps = job.bf16_policy, status["device"], job.steps
        if side == "original" and not job.recorded:
            os.makedirs(shared, exist_ok=True)
            determinism.seed_all(job.seed)
            model = entry.make_model(dropout=0.0)
            status["dropout_active"] = determinism.dropout_modules(model)
            weights = execute.round_weights(model)
            del model
            execute.save_tensors(weights, os.path.join(shared, "weights.safetensors"))
            status["weights_sha256"] = execute.tensor_hash(weights)
            status["batch_sha256"] = {}
            for step in steps:
                batch = entry.batch(step)
                status["batch_sha256"][str(step)] = execute.save_batch(batch, os.path.join(shared, f"batch_step{step}"))
            phase = "dropout census"
            census = execute.dropout_census(entry, weights, execute.load_batch(os.path.join(shared, f"batch_step{steps[0]}")),
                                            status["device"], job.seed)
            with open(os.path.join(shared, DROPOUT), "w", encoding="utf-8") as fh:
                json.dump(census, fh)
            own_sites = census["sites"]
            with open(os.path.join(shared, READY), "w") as fh:
                fh.write(status["weights_sha256"])
        else:
            waited = _wait_for(shared, job.wait_timeout)
            if waited != "ready":
                status.update(phase="skipped", error={"summary": "the original side produced no weights "
                                                      f"({'it failed' if waited == 'failed' else 'timeout'})"})
                return status
            weights = execute.load_tensors(os.path.join(shared, "weights.safetensors"))
            status["weights_sha256"] = execute.tensor_hash(weights)
            status["batch_sha256"] = {}
            status["own_batch_sha256"] = {}
            for step in steps:
                batch = execute.load_batch(os.path.join(shared, f"batch_step{step}"))
                status["batch_sha256"][str(step)] = execute.batch_hash(batch)
                try:
                    status["own_batch_sha256"][str(step)] = execute.batch_hash(entry.batch(step))
                except Exception as exc:  # noqa: BLE001 - reported, the shared batch is used
                    status["own_batch_sha256"][str(step)] = f"error: {describe(exc, tree)['summary']}"
        status["timings"]["weights"] = timer()
        # the original's dropout decides for both sides: neutralised in every numeric run when it applies any
        phase = "dropout census"
        first = execute.load_batch(os.path.join(shared, f"batch_step{steps[0]}"))
        original_sites = _original_dropout(shared)
        own = own_sites if own_sites is not None else execute.dropout_census(entry, weights, first, device,
                                                                               job.seed)["sites"]
        neutral = bool(original_sites)
        status["dropout"] = {"sites": own, "neutralised": neutral}
        if neutral:
            phase = "dropout statistics"
            status["dropout"]["statistics"] = execute.dropout_census(entry, weights, first, device, job.seed,
                                                                     seeds=SEEDS)

        for policy in job.policies:
            for step in steps:
                phase = f"{policy} step {step}"
                batch = execute.load_batch(os.path.join(shared, f"batch_step{step}"))
                determinism.seed_all(job.seed)
                model = execute.build_model(entry, weights, device, policy, bf16_policy)
                recorder = Recorder(model, max_bytes=job.max_bytes).attach()
                data = execute.prepare_batch(batch, device, policy, bf16_policy)
                with execute.dropout_context(model, neutral):
                    execute.forward_backward(entry, model, model, data, policy, bf16_policy, device, recorder)
                recorder.record_param_grads(execute.param_grads(model))
                recorder.detach()
                run_dir = os.path.join(out, policy, f"step{step}", "rank0")
                recorder.save(run_dir, {"side": side, "policy": policy, "bf16_policy": bf16_policy, "step": step,
                                        "rank": 0, "device": device})
                status["runs"][f"{policy}/step{step}"] = run_dir
                recorder = None
                del model
        status["timings"]["runs"] = timer()

        if entry.make_optimizer is not None and job.optimizer:
            phase = "optimizer"
            rec, name = execute.optimizer_updates(entry, weights, device, job.seed, Recorder)
            run_dir = os.path.join(out, "optimizer")
            rec.save(run_dir, {"side": side, "optimizer": name})
            status["optimizer"] = {"name": name, "dir": run_dir, "semantic": getattr(rec, "optimizer_semantic", None)}
            status["timings"]["optimizer"] = timer()
            batches = [execute.load_batch(os.path.join(shared, f"batch_step{s}")) for s in steps]
            status["train"] = {}
            for policy in job.policies:
                phase = f"{policy} training ({execute.TRAIN_STEPS} steps)"
                rec, facts = execute.train_updates(entry, weights, batches, device, policy, bf16_policy,
                                                   job.seed, Recorder, neutral=neutral)
                run_dir = os.path.join(out, "train", policy)
                rec.save(run_dir, {"side": side, "policy": policy, "training": facts})
                status["train"][policy] = dict(facts, dir=run_dir)
            status["timings"]["train"] = timer()
        status["ok"] = True
    except Exception as exc:  # noqa: BLE001 - the program failed: that is a result
        active = recorder.active_modules() if recorder is not None else []
        status.update(phase=failure_phase(exc, tree), error=describe(exc, tree, during=phase, active_modules=active))
        if side == "original":
            _mark_failed(side, shared)
    return status


def _original_dropout(shared: str) -> dict[str, Any]:
    """The dropout sites the original side found (none recorded: none)."""
    try:
        with open(os.path.join(shared, DROPOUT), encoding="utf-8") as fh:
            return json.load(fh).get("sites") or {}
    except (OSError, ValueError):
        return {}


def _status_name(job: Job) -> str:
    """``status_rank<r>.json`` for a rank of torchrun, else ``status.json``."""
    ranked = isinstance(job, ParallelJob) or (isinstance(job, ScriptJob) and job.distributed) \
        or (isinstance(job, BenchJob) and "RANK" in os.environ)
    return f"status_rank{os.environ.get('RANK', '0')}.json" if ranked else "status.json"


def _run(job: Job) -> dict[str, Any]:
    if isinstance(job, SideJob):
        return run_side(job)
    if isinstance(job, PlanJob):
        from .plan import run_plan

        return run_plan(job)
    if isinstance(job, ParallelJob):
        from .parallel import run_rank

        return run_rank(job)
    if isinstance(job, BenchJob):
        from .bench import run_bench

        return run_bench(job)
    if isinstance(job, TraceJob):
        from .optrace import run_optrace

        return run_optrace(job)
    if isinstance(job, ScriptJob):
        from .script_hooks import run_script

        return run_script(job)
    raise RecordError(f"no runner for job kind {job.KIND!r}")


def serve(job_path: str, run: Callable[[Any], dict[str, Any]], job_type: type[Job] | None = None,
          status_type: type[Status] | None = None) -> int:
    """Read the job at ``job_path``, run it, write its status record: always, a harness failure is a status
    too. ``job_type`` None: any kind of ``records.JOB_KINDS``; ``status_type`` None: the kind's
    (``records.STATUS_OF``). Other child programs (the census) serve their own records through this."""
    try:
        job = records.read_job(job_path, job_type)
    except (OSError, ValueError) as exc:  # no job to name an out folder: next to the job file
        _write_failure(os.path.join(os.path.dirname(os.path.abspath(job_path)), "status.json"), str(exc))
        return 1
    path = os.path.join(job.out, _status_name(job))
    try:
        # the runners build their status as a dict while they run (a crash keeps what was known);
        # it is frozen into the kind's record here, so a field the record lacks fails in the child
        status = records.from_json(run(job), status_type or records.STATUS_OF[job.KIND], path)
    except BaseException as exc:  # noqa: BLE001 - last resort: always leave a status
        from .errors import frame_text, harness_frame

        ours = harness_frame(exc, getattr(job, "tree", None))
        _write_failure(path, f"{type(exc).__name__}: {exc}", traceback.format_exc()[-4000:],
                       frame_text(ours) if ours is not None else None)
        return 1
    records.write(status, path)
    return 0


def _write_failure(path: str, summary: str, trace: str | None = None, frame: str | None = None) -> None:
    records.write(Status(phase="harness", error=Failure(summary=summary, traceback=trace, harness_frame=frame)), path)


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    return serve(argv[0], _run)


if __name__ == "__main__":
    sys.exit(main())
