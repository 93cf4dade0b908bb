"""Script mode: ``migrate validate ORIGINAL --script train.py -- ARGS`` (a smoke check).

The unmodified training script runs K optimizer steps (``--curve-steps``) in four children: the
original as is (R) and with autocast forced off (G, the fp32 golden), the migrated copy as is (T16)
and with autocast off (T32). Global hooks do the rest, without touching the script:

* ``register_module_forward_(pre_)hook`` records every module call of step 0 (names from the first
  module called at top level, the "root");
* at the root's first forward the original side rounds the root's floating state to bf16 once and
  saves it; the other runs wait for it and load it in place (so the optimizer keeps its references):
  same weights everywhere, sha256 recorded; the root's first inputs are hashed on every side;
* ``register_optimizer_step_pre_hook`` records the (clipped, reduced) grads of step 0 and counts
  steps; ``Tensor.backward`` / ``torch.autograd.backward`` record the loss of every step; after K
  steps the run stops (``StopScript``, a BaseException the script's ``except Exception`` won't eat).

S1 compares step 0 with the usual verdicts and the parameter updates after the K steps; the
K-step loss curve (T16 vs R) is reported, warning above a 2e-3 relative difference, and never fails
the stage. S2 runs the script under torchrun at N ranks on both sides (:mod:`.script_parallel`);
S0/S3 need the protocol (a template is in the notes).
Each side runs in its own precision policy (an fp16 script runs fp16 on CPU too: neither the CUDA
remap nor the emulation substitutes bf16); the effective policy of R and T16 at step 0 (autocast
coverage and dtype, activation/param/grad dtypes, :mod:`.policy`) is recorded and compared.
Limits: G needs the script's bf16 policy to be autocast (a ``model.to(bfloat16)`` script has no
fp32 golden this way, and then R = G: the result says so); a script that never calls an
optimizer stops only at its own end.
"""

from __future__ import annotations

import os
import runpy
import sys
import time
from typing import Any

from .script_parallel import CURVE_WARN  # one direction: script_parallel never imports this module


class StopScript(BaseException):
    """Raised from the optimizer hook once the requested steps have run."""


def _force_autocast_off(patches: list) -> None:
    from torch.amp import autocast_mode

    cls = autocast_mode.autocast
    real_init = cls.__init__

    def __init__(self, device_type, dtype=None, enabled=True, cache_enabled=None):
        real_init(self, device_type, dtype=dtype, enabled=False, cache_enabled=cache_enabled)

    cls.__init__ = __init__  # type: ignore[method-assign]
    patches.append((cls, "__init__", real_init))


class _ScriptHooks:
    def __init__(self, job: dict[str, Any]) -> None:
        from .recorder import Recorder

        self.job = job
        self.recorder_cls = Recorder
        self.recorder: Any | None = None
        self.root = None
        self.steps = 0
        self.losses: list[float] = []
        self.handles: list = []
        self.status: dict[str, Any] = {}
        self.param_names: dict[int, str] = {}
        self.in_backward = False
        self.probe: Any | None = None
        self.p0: dict[str, Any] = {}

    # ------------------------------------------------------------- module hooks (global)
    def install(self) -> None:
        import torch
        from torch.nn.modules import module as module_mod
        from torch.optim import optimizer as optim_mod

        self.handles.append(module_mod.register_module_forward_pre_hook(self._pre))
        self.handles.append(optim_mod.register_optimizer_step_pre_hook(self._opt_pre))
        self.handles.append(optim_mod.register_optimizer_step_post_hook(self._opt_post))
        real_backward = torch.Tensor.backward
        hooks = self

        def backward(tensor, *args, **kwargs):
            if hooks.in_backward:  # re-entered through a TorchFunctionMode (the CUDA device remap)
                return real_backward(tensor, *args, **kwargs)
            if tensor.numel() == 1:
                hooks.losses.append(float(tensor.detach().float()))
                if hooks.recorder is not None and hooks.steps == 0 and hooks.recorder.loss is None:
                    hooks.recorder.record_loss(tensor)
            hooks.in_backward = True
            try:
                result = real_backward(tensor, *args, **kwargs)
            finally:
                hooks.in_backward = False
            if tensor.numel() == 1 and hooks.steps == 0:
                hooks._record_backward_grads()
            return result

        torch.Tensor.backward = backward  # type: ignore[method-assign, assignment]

    def _pre(self, module, args):
        if self.root is None:
            self.root = module
            self._share_weights(module, args)
            self.recorder = self.recorder_cls(module, max_bytes=self.job.get("max_bytes", 1 << 30)).attach()
            self.param_names = {id(p): n for n, p in module.named_parameters()}
            from .policy import PolicyProbe

            self.probe = PolicyProbe(module, self.job.get("device", "cpu")).attach()
            self.probe._pre(module, args)  # the root's own call started before the probe's hooks
            # the recorder's own pre-hook was registered after this call started: record the root by hand
            self.recorder._pre_hook("_root")(module, args, {})
        return None

    def _share_weights(self, root, args) -> None:
        import torch

        from . import execute
        from .handoff import READY, _wait_for

        shared = self.job["shared"]
        state = root.state_dict()
        self.status["input_sha256"] = execute.batch_hash([a for a in args if torch.is_tensor(a)])
        if self.job.get("writes_weights"):
            with torch.no_grad():
                for t in state.values():
                    if torch.is_tensor(t) and t.is_floating_point():
                        t.copy_(t.to(torch.bfloat16).to(t.dtype))
            weights = {k: v.detach().to("cpu").float() if v.is_floating_point() else v.detach().to("cpu").clone()
                       for k, v in root.state_dict().items()}
            self.status["weights_sha256"] = execute.tensor_hash(weights)
            if os.environ.get("RANK", "0") == "0":  # under torchrun every rank rounds, rank 0 writes
                os.makedirs(shared, exist_ok=True)
                execute.save_tensors(weights, os.path.join(shared, "weights.safetensors"))
                with open(os.path.join(shared, READY), "w") as fh:
                    fh.write(self.status["weights_sha256"])
        else:
            if _wait_for(shared, self.job.get("wait_timeout", 600)) != "ready":
                raise RuntimeError("the original script produced no weights to share")
            weights = execute.load_tensors(os.path.join(shared, "weights.safetensors"))
            missing = sorted(set(state) - set(weights))
            if missing:
                raise RuntimeError(f"unmatched state_dict: {', '.join(missing[:5])} not in the original's weights")
            with torch.no_grad():
                for k, t in state.items():
                    if torch.is_tensor(t):
                        t.copy_(weights[k].to(dtype=t.dtype, device=t.device))
            self.status["weights_sha256"] = execute.tensor_hash(weights)
        self.p0 = {n: p.detach().float().cpu().clone() for n, p in root.named_parameters()}

    def _record_backward_grads(self) -> None:
        """The grads right after step 0's backward (DDP has reduced them; no clipping yet, which can
        hide a reduction factor from the optimizer's view)."""
        if self.recorder is None or self.root is None or self.status.get("backward_grads"):
            return
        for n, p in self.root.named_parameters():
            if p.grad is not None:
                path = n.rpartition(".")[0] or "_root"
                self.recorder._event(f"Grad.after_backward.{n}", f"{n}.grad_after_backward", "param_grad", path,
                                     "after_backward", path, p.grad)
        self.status["backward_grads"] = True

    # ------------------------------------------------------------- optimizer hooks
    def _opt_pre(self, optimizer, args, kwargs):
        if self.steps == 0 and self.probe is not None:
            self.probe._opt_pre(optimizer, args, kwargs)
            self.probe.detach()
            self.status["policy"] = {"policy": self.probe.facts(self.root)}
            self.probe = None
        if self.steps == 0 and self.recorder is not None:
            grads = []
            for group in optimizer.param_groups:
                for p in group["params"]:
                    name = self.param_names.get(id(p))
                    if name is not None:
                        grads.append((name, p.grad))
            order = {n: i for i, n in enumerate(self.param_names.values())}
            self.recorder.record_param_grads(sorted(grads, key=lambda ng: order.get(ng[0], 0)))
            self.recorder.detach()
            self.recorder.save(os.path.join(self.job["out"], "step0"), {"script": self.job["script"]})
            self.status["step0"] = os.path.join(self.job["out"], "step0")
        return None

    def _opt_post(self, optimizer, args, kwargs):
        self.steps += 1
        if self.steps >= self.job["curve_steps"]:
            self._save_updates(type(optimizer).__name__)
            raise StopScript()

    def _save_updates(self, optimizer_name: str) -> None:
        """Each parameter's update after the K steps, ``p_K - p_0`` (compared like S1's training steps)."""
        if self.root is None:
            return
        rec = self.recorder_cls(self.root)
        for n, p in self.root.named_parameters():
            if n in self.p0:
                rec._event(f"Train.after{self.steps}.{n}", f"train.after.{n}", "training", n.rpartition(".")[0] or "_root",
                           optimizer_name, "training", p.detach().float().cpu() - self.p0[n])
        rec.save(os.path.join(self.job["out"], "train"), {"script": self.job["script"], "steps": self.steps})
        self.status["train"] = os.path.join(self.job["out"], "train")


def run_script(job: dict[str, Any]) -> dict[str, Any]:
    from . import determinism, protocol
    from .errors import describe

    status: dict[str, Any] = {"ok": False, "side": job["side"], "policy": job["policy"]}
    tree = job["tree"]
    try:
        layers = protocol.install_layers(job["side"])
        status.update(layers=layers.used, device=layers.device)
        status["manifest"] = determinism.apply(job["seed"], job["threads"], layers.device)
    except Exception as exc:  # noqa: BLE001
        status.update(phase="entry", error=describe(exc, tree))
        return status
    patches: list = []
    if job["policy"] == "fp32":
        _force_autocast_off(patches)
    if job.get("distributed"):  # one rank of torchrun: its own folder
        job = dict(job, out=os.path.join(job["out"], f"rank{os.environ.get('RANK', '0')}"))
    hooks = _ScriptHooks(dict(job, device=layers.device))
    hooks.install()
    script = os.path.join(tree, job["script"])
    if not os.path.exists(script):
        status.update(phase="entry", error={"summary": f"{script}: no such script"})
        return status
    sys.argv = [script, *job["args"]]
    sys.path.insert(0, os.path.dirname(script))
    os.chdir(tree)
    t0 = time.perf_counter()
    try:
        runpy.run_path(script, run_name="__main__")
        status["stopped"] = "script ended"
    except StopScript:
        status["stopped"] = f"after {hooks.steps} optimizer steps"
    except SystemExit as exc:
        if exc.code not in (0, None):
            if job.get("writes_weights"):
                from .handoff import _mark_failed

                _mark_failed("original", job["shared"])
            status.update(phase="run", error={"summary": f"the script exited with code {exc.code}"})
            return status
        status["stopped"] = "script exited"
    except BaseException as exc:  # noqa: BLE001 - the program failed: a result
        if job.get("writes_weights"):
            from .handoff import _mark_failed

            _mark_failed("original", job["shared"])
        active = hooks.recorder.active_modules() if hooks.recorder is not None else []
        status.update(phase="run", error=describe(exc, tree, during=f"step {hooks.steps}", active_modules=active))
        return status
    finally:
        for owner, name, value in patches:
            setattr(owner, name, value)
    status.update(hooks.status, ok="step0" in hooks.status, losses=hooks.losses, steps=hooks.steps,
                  seconds=round(time.perf_counter() - t0, 2))
    if not status["ok"]:
        status.update(phase="run", error={"summary": "no optimizer step was observed (nothing recorded)"})
    return status


def run_script_mode(opts, progress=None, migrate=None):
    """Parent side of script mode: four children, then S1 + the loss curve."""
    import shutil
    import tempfile

    from . import launcher
    from .compare import Comparison, Run, compare_runs
    from .results import StageResult, ValidationResult
    from .stage_common import _failure_text, _migrate, numeric_stage

    original = os.path.abspath(opts.original)
    work = os.path.abspath(opts.work_dir) if opts.work_dir else tempfile.mkdtemp(prefix="migrate-validate-")
    os.makedirs(work, exist_ok=True)
    try:
        migrated = os.path.abspath(opts.migrated) if opts.migrated else _migrate(original, work, progress, migrate)
        shared = os.path.join(work, "script", "shared")
        runs = {"R": ("original", "as_is", True), "G": ("original", "fp32", False),
                "T16": ("migrated", "as_is", False), "T32": ("migrated", "fp32", False)}
        env = launcher.child_env(opts.seed, opts.threads)
        results = {}
        if progress:
            progress(f"script mode: {opts.script} {' '.join(opts.script_args)} for {opts.curve_steps} steps, "
                     "original (as is, fp32) and migrated (as is, fp32)")
        pending = list(runs.items())
        active = []
        while pending or active:
            while pending and len(active) < 2:
                key, (side, policy, writes) = pending.pop(0)
                job = {"kind": "script", "side": side, "policy": policy, "writes_weights": writes,
                       "tree": original if side == "original" else migrated, "script": opts.script,
                       "args": list(opts.script_args), "curve_steps": opts.curve_steps, "seed": opts.seed,
                       "threads": opts.threads, "shared": shared, "out": os.path.join(work, "script", key),
                       "wait_timeout": opts.timeout, "max_bytes": opts.max_bytes}
                active.append((key, launcher.start(job, key, env, opts.timeout)))
            key, child = active.pop(0)
            results[key] = launcher.wait(child)
        layers = {"original": results["R"].status.get("layers", {}), "migrated": results["T16"].status.get("layers", {})}
        stages = [StageResult(s, "not_run", reason="script mode: needs the validate.py protocol (make_model, ...; "
                                                   "the template is in the notes)") for s in ("S0", "S3")]
        failures = {k: r.failure() for k, r in results.items() if r.failure() is not None}
        if failures:
            key, failure = sorted(failures.items(), key=lambda kv: ("R", "T16", "G", "T32").index(kv[0]))[0]
            side = runs[key][0]
            status = "error" if failure.get("phase") in ("entry", "harness") else "fail"
            s1 = StageResult("S1", status, summary=f"the {side} script failed ({key})",
                             reason=f"{side} script ({key}) {_failure_text(failure)}")
        else:
            st = {k: r.status for k, r in results.items()}
            comparison = Comparison()
            G, R = Run.load(st["G"]["step0"]), Run.load(st["R"]["step0"])
            same_policy = st["R"]["losses"][:1] == st["G"]["losses"][:1]
            comparison.extend(compare_runs(G, None if same_policy else R, Run.load(st["T32"]["step0"]),
                                           Run.load(st["T16"]["step0"]), label="step0/", gate_unmatched=True))
            if all(st[k].get("train") for k in runs):
                from .compare_train import compare_training

                comparison.extend(compare_training(Run.load(st["G"]["train"]), None if same_policy else
                                                   Run.load(st["R"]["train"]), Run.load(st["T32"]["train"]),
                                                   Run.load(st["T16"]["train"])))
            curve_t, curve_r = st["T16"]["losses"], st["R"]["losses"]
            n = min(len(curve_t), len(curve_r))
            diffs = [abs(a - b) / max(abs(b), 1e-30) for a, b in zip(curve_t[:n], curve_r[:n])]
            worst = max(diffs) if diffs else 0.0
            curve_check = {"check": f"loss curve, {n} steps (smoke check, not a gate)",
                           "status": "warn" if worst > CURVE_WARN else "pass", "worst": worst,
                           "message": f"max per-step relative loss difference T vs R {worst:.3g} (bound {CURVE_WARN})"}
            notes = [f"script mode: {opts.script} {' '.join(opts.script_args)}; weights shared at the root's first forward"]
            if st["T16"].get("input_sha256") != st["R"].get("input_sha256"):
                notes.append("the migrated script's first inputs differ from the original's (input sha256)")
            if same_policy:
                notes.append("the script's bf16 policy is not autocast (forcing autocast off changed nothing): no fp32 golden")
            from .policy import compare_policies

            policy_row = compare_policies(st["R"].get("policy"), st["T16"].get("policy"), "as-is")
            s1 = numeric_stage("S1", comparison, bench={"seconds": round(sum(r.seconds for r in results.values()), 2)},
                               notes=notes, extra_summary=f"loss curve max rel diff {worst:.3g}",
                               extra_checks=(curve_check,) + ((policy_row,) if policy_row else ()))
        stages.insert(1, s1)
        if "S2" not in opts.stages:
            s2 = StageResult("S2", "not_run", reason="not selected (--stages)")
        elif s1.status not in ("pass", "warn") and not opts.force:
            s2 = StageResult("S2", "not_run", reason="S1 did not pass (--force runs it anyway)")
        else:
            from .script_parallel import run_script_s2

            s2 = run_script_s2(opts, original, migrated, work, progress)
        stages.insert(2, s2)
        from .script_parallel import PROTOCOL_TEMPLATE

        return ValidationResult(original=original, migrated=migrated, stages=tuple(stages), layers=layers,
                                notes=(PROTOCOL_TEMPLATE,),
                                manifest={"seed": opts.seed, "curve_steps": opts.curve_steps,
                                          "weights_sha256": results["R"].status.get("weights_sha256")},
                                work_dir=work if opts.work_dir else None, mode="script")
    finally:
        if not opts.work_dir:
            shutil.rmtree(work, ignore_errors=True)
