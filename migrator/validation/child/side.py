"""S1 on one side (child side; ``kind: "side"`` jobs).

The original side writes the shared bf16-rounded weights and batches, then runs G = fp32 and R = bf16; the
migrated side waits for them, then runs T32 and T16. Both record every run (:mod:`.recorder`), and, when
the protocol has ``make_optimizer``, the optimizer in isolation and ``TRAIN_STEPS`` real training steps.
The original's dropout decides for both sides: neutralised in every numeric run when it applies any.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..facts import NOISE_SUFFIX, noise_run
from ..records import SideJob
from . import built_state, execute, fused_args, stochastic_rounding
from .dropout import SEEDS
from .handoff import READY, _mark_failed, _wait_for

if TYPE_CHECKING:
    import torch

    from .protocol import Entry, Layers
    from .recorder import Recorder

DROPOUT = "dropout.json"  # the original side's dropout sites, next to the shared weights
WEIGHTS = "weights.safetensors"


def run_side(job: SideJob) -> dict[str, Any]:
    """S1 on one side; returns the status being built (the worker freezes it into a ``SideStatus``)."""
    from . import protocol

    status: dict[str, Any] = {"ok": False, "side": job.side, "tree": job.tree, "runs": {}}
    timer = execute.Timer()

    def versions(layers: Layers) -> None:
        import torch

        tnpu = sys.modules.get("torch_npu")
        status["manifest"].update(torch=torch.__version__, torch_npu=getattr(tnpu, "__version__", None) if tnpu else None)

    started = protocol.prepare(job.side, job.tree, job.entry, status, seed=job.seed, threads=job.threads,
                               extra=versions, device=job.device)
    if started is None:
        _mark_failed(job.side, job.shared)
        return status
    entry, layers = started
    status["entry"] = entry.source
    status["timings"] = {"setup": timer()}
    _SideRun(job, entry, layers.device, status, timer).run()
    return status


def _batch_path(shared: str, step: int) -> str:
    return os.path.join(shared, f"batch_step{step}")


@dataclass
class _SideRun:
    """One side's S1 run, step by step; ``phase`` and ``recorder`` name where a failure happened."""

    job: SideJob
    entry: Entry
    device: str
    status: dict[str, Any]
    timer: execute.Timer
    phase: str = "weights"
    recorder: Recorder | None = None

    def run(self) -> None:
        from .errors import describe, failure_phase

        job, status = self.job, self.status
        try:
            shared = self._write_shared() if job.side == "original" and not job.recorded else self._read_shared()
            if shared is None:
                return
            weights, own_sites = shared
            status["timings"]["weights"] = self.timer()
            neutral = self._dropout(weights, own_sites)
            for policy in job.policies:
                for step in job.steps:
                    self.phase = f"{policy} step {step}"
                    self._numeric_run(weights, policy, step, neutral)
            if job.side == "original" and "bf16" in job.policies:  # R's noise floor, from the original itself
                self._noise_runs(weights, neutral)
            status["timings"]["runs"] = self.timer()
            if self.entry.make_optimizer is not None and job.optimizer:
                self._optimizer_runs(weights, neutral)
            status["ok"] = True
        except Exception as exc:  # noqa: BLE001 - the program failed: that is a result
            active = self.recorder.active_modules() if self.recorder is not None else []
            status.update(phase=failure_phase(exc, job.tree),
                          error=describe(exc, job.tree, during=self.phase, active_modules=active))
            _mark_failed(job.side, job.shared)

    def _write_shared(self) -> tuple[dict[str, torch.Tensor], dict[str, Any]]:
        """The original side: the bf16-rounded weights, the batches and its dropout sites into the shared
        folder, then the ready marker. Returns (weights, its own dropout sites)."""
        from .. import determinism

        job, entry, status, shared = self.job, self.entry, self.status, self.job.shared
        os.makedirs(shared, exist_ok=True)
        determinism.seed_all(job.seed)
        model = entry.make_model(dropout=0.0)
        status["built"] = built_state.describe(model)
        status["module_eps"] = fused_args.module_eps(model)
        status["dropout_active"] = determinism.dropout_modules(model)
        weights = execute.round_weights(model)
        del model
        execute.save_tensors(weights, os.path.join(shared, WEIGHTS))
        status["weights_sha256"] = execute.tensor_hash(weights)
        status["batch_sha256"] = {str(step): execute.save_batch(entry.batch(step), _batch_path(shared, step))
                                  for step in job.steps}
        self.phase = "dropout census"
        first = execute.load_batch(_batch_path(shared, job.steps[0]))
        census = execute.dropout_census(entry, weights, first, self.device, job.seed)
        with open(os.path.join(shared, DROPOUT), "w", encoding="utf-8") as fh:
            json.dump(census, fh)
        with open(os.path.join(shared, READY), "w") as fh:
            fh.write(status["weights_sha256"])
        return weights, census["sites"]

    def _read_shared(self) -> tuple[dict[str, torch.Tensor], None] | None:
        """The migrated side (or a recorded original): wait for the shared weights and batches; None when
        the original produced none (the status says so)."""
        job, status, shared = self.job, self.status, self.job.shared
        waited = _wait_for(shared, job.wait_timeout)
        if waited != "ready":
            status.update(phase="skipped", error={"summary": "the original side produced no weights "
                                                  f"({'it failed' if waited == 'failed' else 'timeout'})"})
            return None
        from .. import determinism

        determinism.seed_all(job.seed)  # this side's own model from the seed, as the original built its own
        own_model = self.entry.make_model(dropout=0.0)
        status["built"] = built_state.describe(own_model)
        status["module_eps"] = fused_args.module_eps(own_model)
        del own_model
        weights = execute.load_tensors(os.path.join(shared, WEIGHTS))
        status["weights_sha256"] = execute.tensor_hash(weights)
        status["batch_sha256"] = {}
        status["own_batch_sha256"] = {}
        for step in job.steps:
            status["batch_sha256"][str(step)] = execute.batch_hash(execute.load_batch(_batch_path(shared, step)))
            status["own_batch_sha256"][str(step)] = self._own_batch_hash(step)
        return weights, None

    def _own_batch_hash(self, step: int) -> str:
        """The hash of this side's own batch (the shared one is used; a failure is reported, not raised)."""
        from .errors import describe

        try:
            return execute.batch_hash(self.entry.batch(step))
        except Exception as exc:  # noqa: BLE001 - reported, the shared batch is used
            return f"error: {describe(exc, self.job.tree)['summary']}"

    def _dropout(self, weights: dict[str, torch.Tensor], own_sites: dict[str, Any] | None) -> bool:
        """This side's dropout sites; True when the original's apply any (then neutralised everywhere)."""
        job, status = self.job, self.status
        self.phase = "dropout census"
        first = execute.load_batch(_batch_path(job.shared, job.steps[0]))
        original_sites = _original_dropout(job.shared)
        own = own_sites if own_sites is not None else execute.dropout_census(self.entry, weights, first, self.device,
                                                                               job.seed)["sites"]
        neutral = bool(original_sites)
        status["dropout"] = {"sites": own, "neutralised": neutral}
        if neutral:
            self.phase = "dropout statistics"
            status["dropout"]["statistics"] = execute.dropout_census(self.entry, weights, first, self.device, job.seed,
                                                                     seeds=SEEDS)
        return neutral

    def _noise_runs(self, weights: dict[str, torch.Tensor], neutral: bool) -> None:
        """The original's bf16 steps again, every bf16 result rounded stochastically: R's noise floor. A run
        that fails (an op the mode cannot take) ends the samples; the ratio then falls back to R alone."""
        try:
            for step in self.job.steps:
                for sample in range(stochastic_rounding.SAMPLES):
                    self.phase = f"bf16 step {step}, stochastically rounded ({sample + 1})"
                    self._numeric_run(weights, "bf16", step, neutral, noise_sample=sample)
        except Exception:  # noqa: BLE001 - the floor is optional; the program ran in every real run
            self.recorder = None
            self.status["runs"] = {k: v for k, v in self.status["runs"].items() if NOISE_SUFFIX not in k}

    def _numeric_run(self, weights: dict[str, torch.Tensor], policy: str, step: int, neutral: bool,
                     noise_sample: int | None = None) -> None:
        """One recorded forward/backward of ``step`` under ``policy`` (with ``noise_sample``: every bf16 result
        rounded stochastically, :mod:`.stochastic_rounding`)."""
        from .. import determinism
        from .recorder import Recorder

        job, device, bf16_policy = self.job, self.device, self.job.bf16_policy
        batch = execute.load_batch(_batch_path(job.shared, step))
        determinism.seed_all(job.seed)
        model = execute.build_model(self.entry, weights, device, policy, bf16_policy)
        recorder = self.recorder = Recorder(model, max_bytes=job.max_bytes).attach()
        data = execute.prepare_batch(batch, device, policy, bf16_policy)
        rounding = contextlib.nullcontext() if noise_sample is None else \
            stochastic_rounding.mode(job.seed * 1000 + step * 10 + noise_sample)
        fused_norms: list[dict[str, Any]] = []
        first_fp32 = policy == "fp32" and step == job.steps[0]
        probe = fused_args.fused_norm_calls(model, fused_norms) if first_fp32 else contextlib.nullcontext()
        with execute.dropout_context(model, neutral), rounding, probe:
            execute.forward_backward(self.entry, model, model, data, policy, bf16_policy, device, recorder)
        if first_fp32:
            self.status["fused_norms"] = fused_norms
        recorder.record_param_grads(execute.param_grads(model))
        recorder.detach()
        run = policy if noise_sample is None else noise_run(noise_sample)
        run_dir = os.path.join(job.out, run, f"step{step}", "rank0")
        recorder.save(run_dir, {"side": job.side, "policy": policy, "bf16_policy": bf16_policy, "step": step,
                                "rank": 0, "device": device, **({} if noise_sample is None else {"rounding": "stochastic"})})
        self.status["runs"][f"{run}/step{step}"] = run_dir
        self.recorder = None

    def _optimizer_runs(self, weights: dict[str, torch.Tensor], neutral: bool) -> None:
        """The optimizer in isolation, then ``TRAIN_STEPS`` real training steps per policy."""
        from .recorder import Recorder

        job, status, device = self.job, self.status, self.device
        self.phase = "optimizer"
        rec, name, semantic = execute.optimizer_updates(self.entry, weights, device, job.seed, Recorder)
        run_dir = os.path.join(job.out, "optimizer")
        rec.save(run_dir, {"side": job.side, "optimizer": name})
        status["optimizer"] = {"name": name, "dir": run_dir, "semantic": semantic}
        status["timings"]["optimizer"] = self.timer()
        batches = [execute.load_batch(_batch_path(job.shared, s)) for s in job.steps]
        status["train"] = {}
        for policy in job.policies:
            self.phase = f"{policy} training ({execute.TRAIN_STEPS} steps)"
            rec, facts = execute.train_updates(self.entry, weights, batches, device, policy, job.bf16_policy,
                                               job.seed, Recorder, neutral=neutral)
            run_dir = os.path.join(job.out, "train", policy)
            rec.save(run_dir, {"side": job.side, "policy": policy, "training": facts})
            status["train"][policy] = dict(facts, dir=run_dir)
        if job.side == "original":  # the noise floor of each update, measured on the original itself
            for policy in job.policies:
                self.phase = f"{policy} training, noise floor ({execute.TRAIN_STEPS} steps)"
                rec, facts = execute.train_updates(self.entry, weights, batches, device, policy, job.bf16_policy,
                                                   job.seed, Recorder, neutral=neutral, perturb=True)
                run_dir = os.path.join(job.out, "train", f"{policy}{NOISE_SUFFIX}")
                rec.save(run_dir, {"side": job.side, "policy": policy, "training": facts})
                status["train"][f"{policy}{NOISE_SUFFIX}"] = dict(facts, dir=run_dir)
        status["timings"]["train"] = self.timer()


def _original_dropout(shared: str) -> dict[str, Any]:
    """The dropout sites the original side found (none recorded: none)."""
    try:
        with open(os.path.join(shared, DROPOUT), encoding="utf-8") as fh:
            found: dict[str, Any] = json.load(fh).get("sites") or {}
            return found
    except (OSError, ValueError):
        return {}
