"""Child side of script mode (``--script``): the unmodified training script under global hooks.

See :mod:`migrator.validation.parent.stages.script` for what the hooks record and how the parent compares
the four runs (R, G, T16, T32).
"""

from __future__ import annotations

import os
import runpy
import sys
import time
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from ..records import ScriptJob
from . import passthrough
from .errors import ProgramFault
from .policy_probe import ScalerTrajectory, patch_grad_scaler

if TYPE_CHECKING:
    import torch

    from .dropout import Dropout
    from .policy_probe import PolicyProbe
    from .recorder import Recorder


class StopScript(BaseException):
    """Raised from the optimizer hook once the requested steps have run."""


def _force_autocast_off(patches: list[tuple[Any, str, Any]]) -> None:
    from torch.amp import autocast_mode

    cls = autocast_mode.autocast
    real_init = cls.__init__

    def __init__(self: autocast_mode.autocast, device_type: str, dtype: torch.dtype | None = None, enabled: bool = True,
                 cache_enabled: bool | None = None) -> None:
        real_init(self, device_type, dtype=dtype, enabled=False, cache_enabled=cache_enabled)

    cls.__init__ = __init__  # type: ignore[method-assign]
    patches.append((cls, "__init__", real_init))


class _ScriptHooks:
    def __init__(self, job: ScriptJob, device: str) -> None:
        from .recorder import Recorder

        self.job, self.device = job, device
        self.recorder_cls = Recorder
        self.recorder: Recorder | None = None
        self.root: torch.nn.Module | None = None
        self.steps = 0
        self.losses: list[float] = []
        self.handles: list[torch.utils.hooks.RemovableHandle] = []
        self.status: dict[str, Any] = {}
        self.param_names: dict[int, str] = {}
        self.in_backward = False
        self.probe: PolicyProbe | None = None
        self.p0: dict[str, torch.Tensor] = {}
        self.scaler = ScalerTrajectory()
        self.dropout: Dropout | None = None  # neutral, from the root's first forward on
        self.unscaled: dict[int, torch.Tensor] = {}  # id(scaler.scale(loss)) -> loss: the loss recorded is the unscaled one

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

        def backward(tensor: torch.Tensor, *args: Any, **kwargs: Any) -> None:
            if hooks.in_backward:  # re-entered through a TorchFunctionMode (the CUDA device remap)
                return passthrough.call(real_backward, tensor, *args, **kwargs)
            if tensor.numel() == 1:
                loss = hooks.unscaled.pop(id(tensor), tensor)
                hooks.losses.append(float(loss.detach().float()))
                if hooks.recorder is not None and hooks.steps == 0 and hooks.recorder.loss is None:
                    hooks.recorder.record_loss(loss)
            hooks.in_backward = True
            try:
                result = passthrough.call(real_backward, tensor, *args, **kwargs)
            finally:
                hooks.in_backward = False
            if tensor.numel() == 1 and hooks.steps == 0:
                hooks._record_backward_grads()
            return result

        torch.Tensor.backward = backward  # type: ignore[method-assign, assignment]

    def _pre(self, module: torch.nn.Module, args: tuple[Any, ...]) -> None:
        if self.root is None:
            self.root = module
            self._share_weights(module, args)
            self.recorder = self.recorder_cls(module, max_bytes=self.job.max_bytes).attach()
            self.param_names = {id(p): n for n, p in module.named_parameters()}
            from .dropout import Dropout
            from .policy_probe import PolicyProbe

            # a script trains with its dropout on: off on both sides, so the runs compare (the sites are compared)
            self.dropout = Dropout(module, neutral=True).__enter__()
            self.probe = PolicyProbe(module, self.device).attach()
            self.probe._pre(module, args)  # the root's own call started before the probe's hooks
            # the recorder's own pre-hook was registered after this call started: record the root by hand
            self.recorder._pre_hook("_root")(module, args, {})
        return None

    def _share_weights(self, root: torch.nn.Module, args: tuple[Any, ...]) -> None:
        import torch

        from . import execute
        from .handoff import READY, _wait_for

        shared = self.job.shared
        state = root.state_dict()
        self.status["input_sha256"] = execute.batch_hash([a for a in args if torch.is_tensor(a)])
        if self.job.writes_weights:
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
            if _wait_for(shared, self.job.wait_timeout) != "ready":
                raise RuntimeError("the original script produced no weights to share")
            weights = execute.load_tensors(os.path.join(shared, "weights.safetensors"))
            missing = sorted(set(state) - set(weights))
            if missing:
                raise ProgramFault(f"unmatched state_dict: {', '.join(missing[:5])} not in the original's weights")
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
    def _opt_pre(self, optimizer: torch.optim.Optimizer, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        if self.steps == 0 and self.probe is not None and self.root is not None:  # the probe starts with the root
            self.probe._opt_pre(optimizer, args, kwargs)
            self.probe.detach()
            self.status["precision"] = {"policy": self.probe.facts(self.root)}
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
            self.recorder.save(os.path.join(self.job.out, "step0"), {"script": self.job.script})
            self.status["step0"] = os.path.join(self.job.out, "step0")
        return None

    def _opt_post(self, optimizer: torch.optim.Optimizer, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        self.steps += 1
        if self.steps >= self.job.curve_steps:
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
        rec.save(os.path.join(self.job.out, "train"), {"script": self.job.script, "steps": self.steps})
        self.status["train"] = os.path.join(self.job.out, "train")


def run_script(job: ScriptJob) -> dict[str, Any]:
    """The script under the hooks until ``curve_steps`` optimizer steps ran; returns the status being built
    (the worker freezes it into a ``ScriptStatus``)."""
    status: dict[str, Any] = {"ok": False, "side": job.side, "policy": job.policy}
    device = _install_layers(job, status)
    if device is None:
        return status
    patches: list[tuple[Any, str, Any]] = []
    if job.policy == "fp32":
        _force_autocast_off(patches)
    if job.distributed:  # one rank of torchrun: its own folder
        job = replace(job, out=os.path.join(job.out, f"rank{os.environ.get('RANK', '0')}"))
    hooks = _ScriptHooks(job, device)
    hooks.install()
    patch_grad_scaler(hooks.scaler, hooks.unscaled, patches)
    script = os.path.join(job.tree, job.script)
    if not os.path.exists(script):
        status.update(phase="entry", error={"summary": f"{script}: no such script"})
        return status
    sys.argv = [script, *job.args]
    sys.path.insert(0, os.path.dirname(script))
    os.chdir(job.tree)
    t0 = time.perf_counter()
    if not _run_path(job, script, hooks, patches, status):
        return status
    status.update(hooks.status, ok="step0" in hooks.status, losses=hooks.losses, steps=hooks.steps,
                  seconds=round(time.perf_counter() - t0, 2))
    if status.get("precision") is not None:
        status["precision"] = dict(status["precision"], scaler=hooks.scaler.facts())
    if not status["ok"]:
        status.update(phase="run", error={"summary": "no optimizer step was observed (nothing recorded)"})
    return status


def _install_layers(job: ScriptJob, status: dict[str, Any]) -> str | None:
    """The side's reference layers and determinism; the device, or None when they failed (phase "entry")."""
    from .. import determinism
    from . import protocol
    from .errors import describe

    try:
        layers = protocol.install_layers(job.side)
        status.update(layers=layers.used, device=layers.device)
        status["manifest"] = determinism.apply(job.seed, job.threads, layers.device)
    except Exception as exc:  # noqa: BLE001
        status.update(phase="entry", error=describe(exc, job.tree))
        return None
    return layers.device


def _run_path(job: ScriptJob, script: str, hooks: _ScriptHooks, patches: list[tuple[Any, str, Any]],
              status: dict[str, Any]) -> bool:
    """Run the script until it ends or the hooks stop it; False when it failed (the status says how)."""
    from .errors import describe, failure_phase

    try:
        runpy.run_path(script, run_name="__main__")
        status["stopped"] = "script ended"
    except StopScript:
        status["stopped"] = f"after {hooks.steps} optimizer steps"
    except SystemExit as exc:
        if exc.code not in (0, None):
            _original_failed(job)
            status.update(phase="run", error={"summary": f"the script exited with code {exc.code}"})
            return False
        status["stopped"] = "script exited"
    except BaseException as exc:  # noqa: BLE001 - the program failed: a result
        _original_failed(job)
        active = hooks.recorder.active_modules() if hooks.recorder is not None else []
        status.update(phase=failure_phase(exc, job.tree),
                      error=describe(exc, job.tree, during=f"step {hooks.steps}", active_modules=active))
        return False
    finally:
        for owner, name, value in patches:
            setattr(owner, name, value)
        if hooks.dropout is not None:
            hooks.dropout.__exit__(None, None, None)
            status["dropout"] = dict(hooks.dropout.facts(), neutralised=True)
    return True


def _original_failed(job: ScriptJob) -> None:
    """The migrated side waits for the original's weights: tell it they will not come."""
    if job.writes_weights:
        from .handoff import _mark_failed

        _mark_failed("original", job.shared)
