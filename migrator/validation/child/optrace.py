"""Op-level trace inside one module (child side, imports torch): the second pass behind "first divergent op".

:class:`OpTracer` records, only while the target module's forward runs, every call of

* a known library op, wrapped wherever the program holds it (``from flash_attn import
  flash_attn_func`` binds a module global: every loaded module's global that *is* the function is
  swapped for the wrapper, and restored): flash_attn_func / flash_attn_varlen_func, xformers
  memory_efficient_attention, torch_npu npu_fusion_attention / npu_rms_norm / npu_rotary_mul /
  npu_swiglu, and the apex Fused*Norm modules (their ``forward``);
* every call of the torch API outside a known op (``TorchFunctionMode``: linear, matmul, norms,
  SDPA, and the element-wise, indexing and view ops between them);

with its output (first tensor), where each of its tensor inputs came from (the op graph the parent
walks back along) and, for known ops and losses, the effective semantic arguments
(:mod:`.op_semantics`). :func:`run_optrace` is the ``optrace`` job: one forward of one S1 step on
the shared weights and batch, events saved as safetensors + JSON for the parent to align. The
job also saves the model's buffers as built (before any step) and, for the target ``loss_fn``,
traces the loss function's calls instead (every argument of a loss, defaults included).
"""

from __future__ import annotations

import functools
import json
import os
import sys
from collections.abc import Callable, Iterable, Iterator
from contextlib import AbstractContextManager
from typing import Any

import torch
from torch.overrides import TorchFunctionMode

from .. import op_semantics as S
from ..records import TraceJob
from .bindings import bindings_of

KNOWN = (("flash_attn", "flash_attn_func"), ("flash_attn", "flash_attn_varlen_func"),
         ("xformers.ops", "memory_efficient_attention"), ("torch_npu", "npu_fusion_attention"),
         ("torch_npu", "npu_rms_norm"), ("torch_npu", "npu_rotary_mul"), ("torch_npu", "npu_swiglu"))
NORM_MODULES = ("apex.normalization", ("FusedLayerNorm", "FusedRMSNorm", "MixedFusedLayerNorm", "MixedFusedRMSNorm"))
LOSS_TARGET = "loss_fn"  # the job's module for a divergence localised to the loss: the loss_fn call is traced


def _first_tensor(value: Any) -> torch.Tensor | None:
    if isinstance(value, torch.Tensor):
        return value
    if isinstance(value, (tuple, list)):
        for v in value:
            t = _first_tensor(v)
            if t is not None:
                return t
    return None


def _tensors(value: Any, out: list[torch.Tensor]) -> list[torch.Tensor]:
    if isinstance(value, torch.Tensor):
        out.append(value)
    elif isinstance(value, (tuple, list)):
        for v in value:
            _tensors(v, out)
    elif isinstance(value, dict):
        for v in value.values():
            _tensors(v, out)
    return out


def _op_name(func: Callable[..., Any]) -> str:
    name = getattr(func, "__name__", "") or type(func).__name__
    if name == "__get__":  # a tensor property (x.T, x.mT)
        name = getattr(getattr(func, "__self__", None), "__name__", "property")
    if name.startswith("__") and name.endswith("__") and len(name) > 4:
        name = name[2:-2]  # __mul__ -> mul, __iadd__ -> iadd, __getitem__ -> getitem
    return name


IN_PLACE_DUNDERS = frozenset({"iadd", "isub", "imul", "itruediv", "ifloordiv", "ipow", "iand", "ior", "ixor",
                              "setitem"})


def _is_plain(v: object) -> bool:
    if isinstance(v, (tuple, list)):
        return all(isinstance(x, (bool, int, float)) for x in v)
    return isinstance(v, (bool, int, float, str))


def _plain_args(args: Iterable[Any], kwargs: dict[str, Any]) -> str:
    """The call's non-tensor arguments (``1``, ``dim=-1``), to tell two calls of one op apart."""
    plain = [repr(a) for a in args if _is_plain(a)]
    plain += [f"{k}={v!r}" for k, v in kwargs.items() if _is_plain(v)]
    return ", ".join(plain)


def _scalar_attrs(module: torch.nn.Module) -> dict[str, Any]:
    return {k: v for k, v in vars(module).items()
            if not k.startswith("_") and isinstance(v, (bool, int, float, str)) and k != "training"}


class OpTracer:
    """Every op inside the target module (element-wise, indexing and views included), each with its
    output and where its tensor inputs came from: an earlier op (``["op", i]``), a parameter or
    buffer (``["param"|"buffer", name]``), the module's inputs (``["input", i]``) or elsewhere
    (``["other"]``); plus the innermost module running it and that module's scalar attributes
    (``eps``, ``scale``, ...), for the parent's walk back along the data flow."""

    def __init__(self, model: torch.nn.Module, target: str, max_bytes: int = 1 << 30) -> None:
        self.model, self.target, self.max_bytes = model, target, max_bytes
        self._bytes = 0
        self.events: list[dict[str, Any]] = []
        self.tensors: dict[str, torch.Tensor] = {}
        self.modules: dict[str, dict[str, Any]] = {}
        self.depth = 0
        self.enabled = 0
        self._restore: list[tuple[Any, str, Any]] = []
        self._handles: list[torch.utils.hooks.RemovableHandle] = []
        self._mode: TorchFunctionMode | None = None
        self._producer: dict[int, int] = {}
        self._pinned: list[torch.Tensor] = []  # keeps ids unique while tracing
        self._leaves = {id(t): ("param", n) for n, t in model.named_parameters()}
        self._leaves.update({id(t): ("buffer", n) for n, t in model.named_buffers()})
        self._inputs: dict[int, int] = {}
        self._stack: list[str] = []

    # ------------------------------------------------------------------ recording
    def _source(self, t: torch.Tensor) -> list[Any]:
        if id(t) in self._producer:
            return ["op", self._producer[id(t)]]
        if id(t) in self._leaves:
            return list(self._leaves[id(t)])
        if id(t) in self._inputs:
            return ["input", self._inputs[id(t)]]
        return ["other"]

    def _record(self, op: str, semantic: S.Semantic | None, output: Any, args: tuple[Any, ...] = (),
                kwargs: dict[str, Any] | None = None) -> None:
        t = _first_tensor(output)
        if t is None or t.is_complex() or t.is_meta:
            return
        kwargs = kwargs or {}
        inputs = _tensors([args, kwargs], [])
        sources = [self._source(x) for x in inputs]
        in_place = op.endswith("_") or op in IN_PLACE_DUNDERS
        same_as = next((k for k, x in enumerate(inputs) if not (in_place and x is t) and x.shape == t.shape
                        and x.dtype != torch.bool and torch.equal(x.detach().float(), t.detach().float())), None)
        name = f"op{len(self.events)}.{op}"
        self._keep(name, t)
        self._producer[id(t)] = len(self.events)
        self._pinned.append(t)
        self.events.append({"name": name, "op": op, "kind": S.KIND.get(op, op), "shape": list(t.shape),
                            "dtype": str(t.dtype).removeprefix("torch."), "args": _plain_args(args, kwargs),
                            "semantic": S.jsonable(semantic) if semantic else None, "inputs": sources,
                            "same_as": same_as,  # the input it only copies or casts (x.to(dtype), .contiguous())
                            "module": self._stack[-1] if self._stack else None})

    def _keep(self, name: str, t: torch.Tensor) -> None:
        if self._bytes + 4 * t.numel() <= self.max_bytes and not (t.is_complex() or t.is_meta):
            self.depth += 1  # the copy is ours, not the program's: not traced
            try:
                self.tensors[name] = t.detach().to("cpu", torch.float32, copy=True).contiguous()
            finally:
                self.depth -= 1
            self._bytes += 4 * t.numel()  # beyond the budget: the op is linked, not compared

    def _active(self) -> bool:
        return self.enabled > 0 and self.depth == 0

    def _call(self, fn: Callable[..., Any], op: str, semantic: S.Semantic | None, args: tuple[Any, ...],
              kwargs: dict[str, Any]) -> Any:
        self.depth += 1
        try:
            out = fn(*args, **kwargs)
        finally:
            self.depth -= 1
        self._record(op, semantic, out, args, kwargs)
        return out

    def _wrap(self, fn: Callable[..., Any], op: str) -> Callable[..., Any]:
        tracer = self

        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            if not tracer._active():
                return fn(*args, **kwargs)
            return tracer._call(fn, op, S.EXTRACTORS[op](op, args, kwargs), args, kwargs)

        return wrapper

    def _wrap_norm(self, forward: Callable[..., Any], cls_name: str) -> Callable[..., Any]:
        tracer = self

        @functools.wraps(forward)
        def wrapper(module: torch.nn.Module, *args: Any, **kwargs: Any) -> Any:
            if not tracer._active():
                return forward(module, *args, **kwargs)
            return tracer._call(functools.partial(forward, module), cls_name, S.norm_module(module), args, kwargs)

        return wrapper

    # ------------------------------------------------------------------ install / remove
    def __enter__(self) -> OpTracer:
        loaded = [(fn, attr) for owner_name, attr in KNOWN
                  if (fn := getattr(sys.modules.get(owner_name), attr, None)) is not None]
        for (fn, attr), places in zip(loaded, bindings_of([fn for fn, _ in loaded])):
            wrapper = self._wrap(fn, attr)
            for module, name in places:
                self._restore.append((module, name, fn))
                setattr(module, name, wrapper)
        norms = sys.modules.get(NORM_MODULES[0])
        for cls_name in NORM_MODULES[1]:
            cls = getattr(norms, cls_name, None) if norms is not None else None
            if cls is not None:
                self._restore.append((cls, "forward", vars(cls).get("forward")))  # None: inherited
                cls.forward = self._wrap_norm(cls.forward, cls_name)
        inside = False
        for name, module in self.model.named_modules():
            path = name or "_root"
            if path == self.target or path.startswith(self.target + ".") or self.target == "_root":
                inside = True
                self.modules[path] = {"class": type(module).__name__, **_scalar_attrs(module)}
                self._handles.append(module.register_forward_pre_hook(self._pre(path, path == self.target),
                                                                      with_kwargs=True))
                self._handles.append(module.register_forward_hook(self._post(path == self.target)))
        if not inside and self.target != LOSS_TARGET:
            raise ValueError(f"op trace: no module {self.target!r} in the model")
        tracer = self

        class _Mode(TorchFunctionMode):
            def __torch_function__(self, func: Callable[..., Any], types: Iterable[type], args: tuple[Any, ...] = (),
                                   kwargs: dict[str, Any] | None = None) -> Any:
                kwargs = kwargs or {}
                if not tracer._active():
                    return func(*args, **kwargs)
                name = _op_name(func)
                if name in S.EXTRACTORS:
                    semantic = S.EXTRACTORS[name](name, args, kwargs)
                elif name in S.LOSSES:
                    semantic = S.loss_call(func, name, args, kwargs)
                else:
                    semantic = None
                return tracer._call(func, name, semantic, args, kwargs)

        self._mode = _Mode()
        self._mode.__enter__()
        return self

    def _pre(self, path: str, is_target: bool) -> Callable[[torch.nn.Module, tuple[Any, ...], dict[str, Any]], None]:
        def hook(module: torch.nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
            self._stack.append(path)
            if is_target:
                self.enabled += 1
                if self.enabled == 1:
                    for i, t in enumerate(_tensors([args, kwargs], [])):
                        self._inputs.setdefault(id(t), i)
                        self._keep(f"input.{i}", t)  # what a fused op read from outside (RoPE cos/sin)
            return None

        return hook

    def _post(self, is_target: bool) -> Callable[[torch.nn.Module, tuple[Any, ...], Any], None]:
        def hook(module: torch.nn.Module, args: tuple[Any, ...], output: Any) -> None:
            if self._stack:
                self._stack.pop()
            if is_target:
                self.enabled -= 1
            return None

        return hook

    def trace(self) -> AbstractContextManager[OpTracer]:
        """Trace everything in a ``with`` block (the loss function)."""
        import contextlib

        @contextlib.contextmanager
        def on() -> Iterator[OpTracer]:
            self.enabled += 1
            try:
                yield self
            finally:
                self.enabled -= 1

        return on()

    def __exit__(self, *exc: Any) -> None:
        if self._mode is not None:
            self._mode.__exit__(*exc)
        for h in self._handles:
            h.remove()
        for owner, name, value in reversed(self._restore):
            if value is None:
                delattr(owner, name)
            else:
                setattr(owner, name, value)
        self._pinned.clear()


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
        # buffers as built (make_model, before any step): RoPE caches, masks
        buffers = {f"buffer.{n}": b.detach().to("cpu", torch.float32, copy=True).contiguous()
                   for n, b in model.named_buffers() if b is not None and not b.is_complex()}
        with OpTracer(model, job.module) as tracer, torch.no_grad(), execute.autocast(policy, bf16_policy, device):
            out = model(*args, **kwargs)
            if job.module == LOSS_TARGET:
                with tracer.trace():
                    entry.loss_fn(out, data)
        from safetensors.torch import save

        from migrator.ground import safe_write

        os.makedirs(job.out, exist_ok=True)
        safe_write.write_bytes(os.path.join(job.out, "ops.safetensors"), save({**tracer.tensors, **buffers}))
        with open(os.path.join(job.out, "ops.json"), "w", encoding="utf-8") as fh:
            json.dump({"events": tracer.events, "modules": tracer.modules, "buffers": sorted(buffers)}, fh)
        status.update(ok=True, ops=len(tracer.events))
    except Exception as exc:  # noqa: BLE001 - reported; the stage verdict stands without the op
        status.update(phase="run", error=describe(exc, job.tree, during="op trace"))
    return status
