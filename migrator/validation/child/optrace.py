"""Op-level trace inside one module (child side, imports torch): the second pass behind "first divergent op".

:class:`OpTracer` records, only while the target module's forward runs, every call of

* a known library op, wrapped wherever the program holds it (``from flash_attn import
  flash_attn_func`` binds a module global: every loaded module's global that *is* the function is
  swapped for the wrapper, and restored): flash_attn_func / flash_attn_varlen_func, xformers
  memory_efficient_attention, torch_npu npu_fusion_attention / npu_rms_norm, and the apex
  Fused*Norm modules (their ``forward``);
* a compute op of the torch API (``TorchFunctionMode``: linear, matmul, layer_norm, rms_norm,
  softmax, SDPA, ...), outside any known op;

with its output (first tensor) and, for known op pairs, the effective semantic arguments
(:mod:`.op_semantics`). :func:`run_optrace` is the ``optrace`` job: one forward of one S1 step on
the shared weights and batch, events saved as safetensors + JSON for the parent to align.
"""

from __future__ import annotations

import functools
import json
import os
import sys
from typing import Any

import torch
from torch.overrides import TorchFunctionMode

from .. import op_semantics as S
from ..records import TraceJob

COMPUTE = frozenset({"linear", "matmul", "bmm", "mm", "addmm", "einsum", "layer_norm", "rms_norm", "group_norm",
                     "batch_norm", "softmax", "log_softmax", "silu", "gelu", "relu", "embedding", "conv1d",
                     "conv2d", "scaled_dot_product_attention", "cross_entropy", "dropout"})
KNOWN = (("flash_attn", "flash_attn_func"), ("flash_attn", "flash_attn_varlen_func"),
         ("xformers.ops", "memory_efficient_attention"), ("torch_npu", "npu_fusion_attention"),
         ("torch_npu", "npu_rms_norm"))
NORM_MODULES = ("apex.normalization", ("FusedLayerNorm", "FusedRMSNorm", "MixedFusedLayerNorm", "MixedFusedRMSNorm"))


def _first_tensor(value):
    if isinstance(value, torch.Tensor):
        return value
    if isinstance(value, (tuple, list)):
        for v in value:
            t = _first_tensor(v)
            if t is not None:
                return t
    return None


class OpTracer:
    def __init__(self, model, target: str) -> None:
        self.model, self.target = model, target
        self.events: list[dict[str, Any]] = []
        self.tensors: dict[str, torch.Tensor] = {}
        self.depth = 0
        self.enabled = 0
        self._restore: list[tuple[Any, str, Any]] = []
        self._handles: list = []
        self._mode: TorchFunctionMode | None = None

    # ------------------------------------------------------------------ recording
    def _record(self, op: str, semantic: S.Semantic | None, output) -> None:
        t = _first_tensor(output)
        if t is None or not t.is_floating_point():
            return
        name = f"op{len(self.events)}.{op}"
        self.tensors[name] = t.detach().to("cpu", torch.float32, copy=True).contiguous()
        self.events.append({"name": name, "op": op, "kind": S.KIND.get(op, op), "shape": list(t.shape),
                            "semantic": S.jsonable(semantic) if semantic else None})

    def _active(self) -> bool:
        return self.enabled > 0 and self.depth == 0

    def _wrap(self, fn, op: str):
        tracer = self

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            if not tracer._active():
                return fn(*args, **kwargs)
            semantic = S.EXTRACTORS[op](op, args, kwargs)
            tracer.depth += 1
            try:
                out = fn(*args, **kwargs)
            finally:
                tracer.depth -= 1
            tracer._record(op, semantic, out)
            return out

        return wrapper

    def _wrap_norm(self, forward, cls_name: str):
        tracer = self

        @functools.wraps(forward)
        def wrapper(module, *args, **kwargs):
            if not tracer._active():
                return forward(module, *args, **kwargs)
            tracer.depth += 1
            try:
                out = forward(module, *args, **kwargs)
            finally:
                tracer.depth -= 1
            tracer._record(cls_name, S.norm_module(module), out)
            return out

        return wrapper

    # ------------------------------------------------------------------ install / remove
    def __enter__(self) -> OpTracer:
        for owner_name, attr in KNOWN:
            owner = sys.modules.get(owner_name)
            fn = getattr(owner, attr, None) if owner is not None else None
            if fn is not None:
                self._swap_everywhere(fn, self._wrap(fn, attr))
        norms = sys.modules.get(NORM_MODULES[0])
        for cls_name in NORM_MODULES[1]:
            cls = getattr(norms, cls_name, None) if norms is not None else None
            if cls is not None:
                self._restore.append((cls, "forward", vars(cls).get("forward")))  # None: inherited
                cls.forward = self._wrap_norm(cls.forward, cls_name)
        for name, module in self.model.named_modules():
            if (name or "_root") == self.target:
                self._handles.append(module.register_forward_pre_hook(lambda *_: self._enter_target()))
                self._handles.append(module.register_forward_hook(lambda *_: self._leave_target()))
        tracer = self

        class _Mode(TorchFunctionMode):
            def __torch_function__(self, func, types, args=(), kwargs=None):
                kwargs = kwargs or {}
                name = getattr(func, "__name__", "")
                if name not in COMPUTE or not tracer._active():
                    return func(*args, **kwargs)
                semantic = S.EXTRACTORS[name](name, args, kwargs) if name in S.EXTRACTORS else None
                tracer.depth += 1
                try:
                    out = func(*args, **kwargs)
                finally:
                    tracer.depth -= 1
                tracer._record(name, semantic, out)
                return out

        self._mode = _Mode()
        self._mode.__enter__()
        return self

    def _enter_target(self) -> None:
        self.enabled += 1

    def _leave_target(self) -> None:
        self.enabled -= 1

    def __exit__(self, *exc) -> None:
        if self._mode is not None:
            self._mode.__exit__(*exc)
        for h in self._handles:
            h.remove()
        for owner, name, value in reversed(self._restore):
            if value is None:
                delattr(owner, name)
            else:
                setattr(owner, name, value)

    def _swap_everywhere(self, fn, wrapper) -> None:
        for module in list(sys.modules.values()):
            try:
                names = [k for k, v in vars(module).items() if v is fn]
            except TypeError:
                continue
            for k in names:
                self._restore.append((module, k, fn))
                setattr(module, k, wrapper)


def run_optrace(job: TraceJob) -> dict[str, Any]:
    """One forward of S1 step ``job.step`` in ``job.policy`` with the tracer inside ``job.module``."""
    from .. import determinism
    from . import execute, protocol
    from .errors import describe

    status: dict[str, Any] = {"ok": False, "side": job.side}
    started = protocol.prepare(job.side, job.tree, job.entry, status, seed=job.seed,
                               threads=job.threads)
    if started is None:
        return status
    entry, layers = started
    try:
        weights = execute.load_tensors(os.path.join(job.shared, "weights.safetensors"))
        batch = execute.load_batch(os.path.join(job.shared, f"batch_step{job.step}"))
        determinism.seed_all(job.seed)
        policy, bf16_policy, device = job.policy, job.bf16_policy, layers.device
        model = execute.build_model(entry, weights, device, policy, bf16_policy)
        data = execute.prepare_batch(batch, device, policy, bf16_policy)
        args, kwargs = execute.model_inputs(entry, data)
        with OpTracer(model, job.module) as tracer, torch.no_grad(), execute.autocast(policy, bf16_policy, device):
            model(*args, **kwargs)
        from safetensors.torch import save_file

        os.makedirs(job.out, exist_ok=True)
        save_file(tracer.tensors, os.path.join(job.out, "ops.safetensors"))
        with open(os.path.join(job.out, "ops.json"), "w", encoding="utf-8") as fh:
            json.dump(tracer.events, fh)
        status.update(ok=True, ops=len(tracer.events))
    except Exception as exc:  # noqa: BLE001 - reported; the stage verdict stands without the op
        status.update(phase="run", error=describe(exc, job.tree, during="op trace"))
    return status
