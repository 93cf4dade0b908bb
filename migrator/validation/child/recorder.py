"""Record one forward/backward step: hooks -> tensors (safetensors) + an msprobe-style ``dump.json``.

What is recorded (numerics.md §3.2), in the order it happens:

* every module call's tensor inputs (forward pre-hook) and outputs (forward hook), named like
  msprobe ``Module.<path>.<Class>.forward.<n>.input.<i>`` / ``.output.<i>`` (``<n>`` = call
  count of that module; the root module's path is ``_root``);
* the gradient w.r.t. each module output, through a tensor hook on the output
  (``Module.<path>.<Class>.backward.<n>.input.<i>``, msprobe's backward ``input``) — more robust
  than ``register_full_backward_hook`` with in-place ops and inputs without grad;
* selected API calls whose integer results must agree exactly (MoE routing: ``topk`` indices,
  ``bincount`` per-expert counts), through a ``TorchFunctionMode``
  (``Torch.topk.<n>.forward.output.<i>``);
* the loss (``Loss.loss_fn.forward.0.output.0``) and the reduced parameter grads
  (``Module.<path>.<Class>.parameters_grad.<param>``), given by the caller after reduction.

Every event also carries a *match key* without the class name (``blocks.0.attn.forward.0.output.0``),
so an apex ``FusedRMSNorm`` and the migrated ``_MigrateRMSNorm`` at the same path compare, and a
*scope*: the module whose own code produced the tensor (for an output, the module; for an input,
the enclosing module that was running when it was passed in). The comparator uses the scope to
name the module a divergence starts in. ``active_modules()`` is the call stack at a crash.

Statistics (Max/Min/Mean/Norm) are always written; full tensors up to ``max_bytes`` per run.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator
from typing import Any

from ..dumps import DumpEvent, EventKind, events_json
from . import passthrough

ROOT = "_root"
Hook = Callable[..., None]
API_FUNCS = ("topk", "bincount")


def _flatten(value: Any, prefix: str = "") -> Iterator[tuple[str, Any]]:
    """Yield (dotted index, leaf) for nested tuples/lists/dicts; leaves are tensors or builtins."""
    import torch

    if isinstance(value, torch.Tensor):
        yield prefix, value
    elif isinstance(value, (list, tuple)):
        for i, item in enumerate(value):
            yield from _flatten(item, f"{prefix}.{i}" if prefix else str(i))
    elif isinstance(value, dict):
        for k, item in value.items():
            yield from _flatten(item, f"{prefix}.{k}" if prefix else str(k))
    elif hasattr(value, "__dataclass_fields__") or hasattr(value, "_fields"):  # ModelOutput / namedtuple
        items = value._asdict().items() if hasattr(value, "_asdict") else vars(value).items()
        for k, item in items:
            yield from _flatten(item, f"{prefix}.{k}" if prefix else str(k))
    else:
        yield prefix, value


def _plain(t: Any) -> Any:
    """A detached CPU copy of ``t`` with DTensors gathered (collective: every rank runs the same hooks)."""
    try:
        from torch.distributed.tensor import DTensor
    except ImportError:  # pragma: no cover - torch built without distributed
        pass
    else:
        if isinstance(t, DTensor):
            t = t.full_tensor()
    return t.detach().to("cpu", copy=True).contiguous()


def tensor_record(t: Any, name: str | None, stats_only: bool) -> dict[str, Any]:
    """msprobe's per-tensor record (§1.1 dump format)."""
    from ..metrics import stats

    rec: dict[str, Any] = {"type": "torch.Tensor", "dtype": str(t.dtype), "shape": list(t.shape)}
    if t.is_floating_point():
        rec.update(stats(t))
    else:
        rec.update(stats(t.double()) if t.numel() else {"Max": None, "Min": None, "Mean": None, "Norm": None})
    rec["requires_grad"] = bool(getattr(t, "requires_grad", False))
    if name and not stats_only:
        rec["data_name"] = f"{name}.pt"
    return rec


def _builtin_record(v: Any) -> dict[str, Any] | None:
    if isinstance(v, (bool, int, float, str)) or v is None:
        return {"type": type(v).__name__, "value": v}
    return None


class Recorder:
    """Attach to a model, run one step, then :meth:`save`. See the module docstring."""

    def __init__(self, model: Any, *, record_inputs: bool = True, record_grads: bool = True,
                 api_funcs: tuple[str, ...] = API_FUNCS, max_bytes: int = 1 << 30) -> None:
        self.model = model
        self.record_inputs = record_inputs
        self.record_grads = record_grads
        self.api_funcs = api_funcs
        self.max_bytes = max_bytes
        self.events: list[DumpEvent] = []
        self.tensors: dict[str, Any] = {}
        self.dump: dict[str, dict[str, Any]] = {}
        self.loss: float | None = None
        self._bytes = 0
        self._stack: list[str] = []
        self._classes: dict[str, str] = {}
        self._calls: dict[str, int] = {}
        self._api_calls: dict[str, int] = {}
        self._handles: list = []
        self._names = {id(m): (name or ROOT, type(m).__name__) for name, m in model.named_modules()}
        self.skip_prefixes: tuple[str, ...] = ()

    # ------------------------------------------------------------------ hooks
    def attach(self) -> Recorder:
        for name, module in self.model.named_modules():
            path = name or ROOT
            self._handles.append(module.register_forward_pre_hook(self._pre_hook(path), with_kwargs=True))
            self._handles.append(module.register_forward_hook(self._post_hook(path), with_kwargs=True))
        return self

    def detach(self) -> None:
        for h in self._handles:
            h.remove()
        self._handles.clear()

    def active_modules(self) -> list[str]:
        """Modules whose forward started and has not returned (the call stack, outermost first),
        as ``path (Class)``."""
        return [f"{p} ({self._classes.get(p, '?')})" for p in self._stack]

    def _store(self, name: str, t: Any) -> tuple[Any, bool]:
        plain = _plain(t)
        nbytes = plain.numel() * plain.element_size()
        if self._bytes + nbytes > self.max_bytes:
            return plain, True
        self._bytes += nbytes
        self.tensors[name] = plain
        return plain, False

    def _event(self, name: str, match: str, kind: EventKind, module: str, cls: str, scope: str | None,
               t: Any) -> dict[str, Any]:
        """Store ``t`` (or only its statistics, beyond the byte budget), add its event; msprobe's record of it."""
        plain, stats_only = self._store(name, t)
        rec = tensor_record(plain, name, stats_only)
        norm = rec.get("Norm")
        self.events.append(DumpEvent(name=name, match=match, kind=kind, module=module, cls=cls, scope=scope,
                                     shape=tuple(plain.shape), dtype=str(plain.dtype), stats_only=stats_only,
                                     norm=float(norm) if norm is not None else None))
        return rec

    def _pre_hook(self, path: str) -> Hook:
        def hook(module: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
            cls = type(module).__name__
            self._classes[path] = cls
            n = self._calls.get(path, 0)
            self._calls[path] = n + 1
            scope = self._stack[-1] if self._stack else None
            self._stack.append(path)
            if not self.record_inputs or self._skipped(path):
                return None
            base = f"Module.{path}.{cls}.forward.{n}"
            entry = self.dump.setdefault(base, {})
            arg_recs, kw_recs = [], {}
            for i, arg in enumerate(args):
                arg_recs.append(self._leaf_records(arg, base, path, cls, scope, n, f"input.{i}"))
            for k, arg in kwargs.items():
                kw_recs[k] = self._leaf_records(arg, base, path, cls, scope, n, f"input.{k}")
            entry["input_args"] = arg_recs
            entry["input_kwargs"] = kw_recs
            return None

        return hook

    def _leaf_records(self, value: Any, base: str, path: str, cls: str, scope: str | None, n: int,
                      where: str) -> Any:
        import torch

        out: list[dict[str, Any] | None] = []  # None: a leaf msprobe cannot record (null in dump.json)
        for suffix, leaf in _flatten(value):
            label = f"{where}.{suffix}" if suffix else where
            if isinstance(leaf, torch.Tensor):
                out.append(self._event(f"{base}.{label}", f"{path}.forward.{n}.{label}", "forward_input",
                                       path, cls, scope, leaf))
            else:
                out.append(_builtin_record(leaf))
        return out[0] if len(out) == 1 else out

    def _post_hook(self, path: str) -> Hook:
        def hook(module: Any, args: tuple[Any, ...], kwargs: dict[str, Any], output: Any) -> None:
            import torch

            if self._stack and self._stack[-1] == path:
                self._stack.pop()
            if self._skipped(path):
                return None
            cls = type(module).__name__
            n = self._calls.get(path, 1) - 1
            base = f"Module.{path}.{cls}.forward.{n}"
            entry = self.dump.setdefault(base, {})
            recs: list[dict[str, Any] | None] = []
            bwd = f"Module.{path}.{cls}.backward.{n}"
            for suffix, leaf in _flatten(output):
                label = f"output.{suffix}" if suffix else "output.0"
                if isinstance(leaf, torch.Tensor):
                    recs.append(self._event(f"{base}.{label}", f"{path}.forward.{n}.{label}", "forward_output",
                                            path, cls, path, leaf))
                    if self.record_grads and leaf.requires_grad and leaf.grad_fn is not None:
                        grad_label = label.replace("output", "input", 1)
                        leaf.register_hook(self._grad_hook(bwd, grad_label, path, cls, n))
                else:
                    recs.append(_builtin_record(leaf))
            entry["output"] = recs
            return None

        return hook

    def _grad_hook(self, bwd: str, label: str, path: str, cls: str, n: int) -> Hook:
        def hook(grad: Any) -> None:
            if grad is None:
                return None
            rec = self._event(f"{bwd}.{label}", f"{path}.backward.{n}.{label}", "backward", path, cls, path, grad)
            entry = self.dump.setdefault(bwd, {"input": [], "output": []})
            entry["input"].append(rec)
            return None

        return hook

    def _skipped(self, path: str) -> bool:
        return bool(self.skip_prefixes) and any(path == p or path.startswith(p + ".") for p in self.skip_prefixes)

    # ------------------------------------------------------------------ API calls (routing)
    def api_mode(self) -> Any:
        """A ``TorchFunctionMode`` recording ``topk``/``bincount`` results (enter it around the forward)."""
        import torch
        from torch.overrides import TorchFunctionMode

        recorder = self
        targets = {}
        for fname in self.api_funcs:
            for owner, prefix in ((torch, "Torch"), (torch.Tensor, "Tensor")):
                fn = getattr(owner, fname, None)
                if fn is not None:
                    targets[fn] = (prefix, fname)

        class _ApiRecorder(TorchFunctionMode):
            def __torch_function__(self, func: Any, types: Any, args: tuple[Any, ...] = (),
                                   kwargs: dict[str, Any] | None = None) -> Any:
                result = passthrough.call(func, *args, **(kwargs or {}))
                hit = targets.get(func)
                if hit is not None:
                    recorder._record_api(hit[0], hit[1], result)
                return result

        return _ApiRecorder()

    def _record_api(self, prefix: str, fname: str, result: Any) -> None:
        import torch

        n = self._api_calls.get(fname, 0)
        self._api_calls[fname] = n + 1
        base = f"{prefix}.{fname}.{n}.forward"
        scope = self._stack[-1] if self._stack else None
        recs = []
        for suffix, leaf in _flatten(result):
            label = f"output.{suffix}" if suffix else "output.0"
            if isinstance(leaf, torch.Tensor):
                kind: EventKind = "api" if not leaf.is_floating_point() else "forward_output"
                recs.append(self._event(f"{base}.{label}", f"api.{fname}.{n}.{label}", kind,
                                        scope or ROOT, f"{prefix}.{fname}", scope, leaf))
        self.dump[base] = {"input_args": [], "input_kwargs": {}, "output": recs}

    # ------------------------------------------------------------------ loss and grads
    def record_loss(self, loss: Any) -> None:
        self.loss = float(loss.detach().float())
        rec = self._event("Loss.loss_fn.forward.0.output.0", "loss", "loss", "loss_fn", "loss_fn", None,
                          loss.detach().float().reshape(()))
        self.dump["Loss.loss_fn.forward.0"] = {"input_args": [], "input_kwargs": {}, "output": [rec]}

    def record_param_grads(self, grads: list[tuple[str, Any]]) -> None:
        """``grads``: (full parameter name, reduced grad or None) in parameter order."""
        for pname, grad in grads:
            modpath, _, leaf = pname.rpartition(".")
            path = modpath or ROOT
            try:
                cls = type(self.model.get_submodule(modpath)).__name__
            except AttributeError:
                cls = "Module"
            key = f"Module.{path}.{cls}.parameters_grad"
            entry = self.dump.setdefault(key, {})
            if grad is None:
                self.events.append(DumpEvent(name=f"{key}.{leaf}", match=f"{pname}.grad", kind="param_grad",
                                             module=path, cls=cls, scope=path, missing=True, stats_only=True))
                entry[leaf] = [None]
                continue
            entry[leaf] = [self._event(f"{key}.{leaf}", f"{pname}.grad", "param_grad", path, cls, path, grad)]

    # ------------------------------------------------------------------ output
    def save(self, out_dir: str, meta: dict[str, Any] | None = None) -> str:
        """Write ``tensors.safetensors`` and ``dump.json`` (msprobe format + a ``migrate`` section)."""
        from safetensors.torch import save

        from migrator.ground import safe_write

        os.makedirs(out_dir, exist_ok=True)
        safe_write.write_bytes(os.path.join(out_dir, "tensors.safetensors"), save(dict(self.tensors)))
        doc = {
            "task": "tensor",
            "level": "mix",
            "framework": "pytorch",
            "dump_data_dir": None,
            "data": self.dump,
            "migrate": {"tensor_file": "tensors.safetensors", "loss": self.loss, "events": events_json(self.events),
                        **(meta or {})},
        }
        path = os.path.join(out_dir, "dump.json")
        safe_write.write_text(path, json.dumps(doc, default=_json_default))
        return path


def _json_default(value: Any) -> str:
    return str(value)


__all__ = ["Recorder", "tensor_record", "ROOT"]
