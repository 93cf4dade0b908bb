"""Minimal CUDA -> CPU remap so an ORIGINAL CUDA training script runs unchanged on a CPU box.

STOPGAP: the real device remap is a separate, future component of the validator. This module
does the least that lets the samples' original code run, and is used by ``run.py`` and the
sample tests. ``install()`` returns a handle whose ``uninstall()`` restores everything.

What it maps (the script keeps taking its CUDA code path, on CPU tensors):
* device strings/objects: ``torch.device("cuda[:i]")`` -> cpu (``torch.device`` becomes a proxy
  type; ``isinstance(x, torch.device)`` still works); a ``device=`` kwarg or a positional
  ``"cuda[:i]"``/cuda device in ANY torch function (factories, ``Tensor.to``...) -> cpu, via a
  ``TorchFunctionMode``; ``torch.Generator(device="cuda")``, ``torch.load(map_location=...)``,
  ``torch.set_default_device``, ``init_device_mesh("cuda", ...)`` -> cpu;
* ``Tensor.cuda()``/``Module.cuda()`` -> stay on CPU; ``pin_memory()`` -> no-op (CPU-only torch
  cannot pin); ``Tensor.record_stream`` -> no-op;
* ``torch.cuda``: ``is_available`` True, ``device_count`` = ``LOCAL_WORLD_SIZE`` (default 1),
  ``set_device``/``synchronize``/``empty_cache``/seeding -> no-ops, memory stats 0,
  ``get_device_capability`` (8, 0), ``Stream``/``Event``/``stream``/``current_stream`` -> CPU
  stand-ins (events time with ``perf_counter``), ``nvtx.*`` -> no-ops;
* AMP: ``torch.autocast("cuda")``/``torch.amp.autocast``/``torch.cuda.amp.autocast`` -> CPU
  autocast in the requested dtype (no dtype: fp16, CUDA's default; CPU autocast runs fp16 and
  bf16), so an fp16 original is never run as bf16; ``GradScaler`` ("cuda" or ``torch.cuda.amp``) -> ``torch.amp.GradScaler("cpu")``;
* distributed: backend ``nccl`` -> ``gloo`` in ``init_process_group``/``new_group``; DDP drops
  ``device_ids``/``output_device`` for CPU modules; ``nn.DataParallel`` -> runs the module as is.

Not mapped (fails loudly, as it should): custom CUDA extensions, ``x.is_cuda`` checks (False),
CUDA RNG streams (``torch.cuda.manual_seed`` is a no-op; "cuda" randomness uses the CPU RNG).
"""

from __future__ import annotations

import contextlib
import os
import re
import time
import types

import torch
import torch.distributed as dist
from torch.overrides import TorchFunctionMode

from ..bound_args import wrap_bound

__all__ = ["CUDA_AUTOCAST_DTYPE", "RemapHandle", "install", "to_cpu_device"]

CUDA_AUTOCAST_DTYPE = torch.float16  # torch.autocast("cuda") without a dtype
_REAL_DEVICE = torch.device
_REAL_GENERATOR = torch.Generator
_CUDA_STR = re.compile(r"^cuda(:\d+)?$")


def to_cpu_device(d):
    """Map a CUDA device spec (str, torch.device) to cpu; anything else is returned unchanged."""
    if isinstance(d, str) and _CUDA_STR.match(d):
        return "cpu"
    if isinstance(d, _REAL_DEVICE) and d.type == "cuda":
        return _REAL_DEVICE("cpu")
    return d


class _ProxyMeta(type):
    """``torch.device``/``torch.Generator`` stand-in: builds the real type, with cuda -> cpu."""

    _real: type  # the torch type a class of this metaclass stands in for

    def __instancecheck__(cls, obj):
        return isinstance(obj, cls._real)

    def __subclasscheck__(cls, sub):
        return issubclass(sub, cls._real)

    def __call__(cls, *args, **kwargs):
        if cls._real is _REAL_DEVICE:  # torch.device("cuda"), ("cuda", 1), ("cuda:1"), (type="cuda"), (0)
            spec = args[0] if args else kwargs.get("type")
            if type(spec) is int or to_cpu_device(spec) != spec:
                return _REAL_DEVICE("cpu")
            return _REAL_DEVICE(*args, **kwargs)
        args = tuple(to_cpu_device(a) for a in args)  # torch.Generator("cuda") / (device="cuda")
        if "device" in kwargs:
            kwargs["device"] = to_cpu_device(kwargs["device"])
        return cls._real(*args, **kwargs)


class _device(metaclass=_ProxyMeta):
    _real = _REAL_DEVICE


class _Generator(metaclass=_ProxyMeta):
    _real = _REAL_GENERATOR


class _CudaToCpuMode(TorchFunctionMode):
    """Rewrites device arguments of every torch function call to cpu."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if "device" in kwargs:
            dev = kwargs["device"]
            kwargs["device"] = "cpu" if type(dev) is int else to_cpu_device(dev)  # device=0 is cuda:0
        if func is torch.Tensor.to and len(args) > 1 and type(args[1]) is int:
            args = (args[0], "cpu") + tuple(args[2:])  # x.to(0) means cuda:0
        args = tuple(to_cpu_device(a) if isinstance(a, (str, _REAL_DEVICE)) else a for a in args)
        return func(*args, **kwargs)


# ---- torch.cuda stand-ins -------------------------------------------------------------------

class _Event:
    def __init__(self, enable_timing=False, blocking=False, interprocess=False):
        self._t = None

    def record(self, stream=None):
        self._t = time.perf_counter()

    def wait(self, stream=None):
        pass

    def query(self):
        return True

    def synchronize(self):
        pass

    def elapsed_time(self, end_event):
        return (end_event._t - self._t) * 1000.0  # milliseconds, as CUDA events report


class _Stream:
    def __init__(self, device=None, priority=0, **kwargs):
        self.device = _REAL_DEVICE("cpu")
        self.priority = priority

    def wait_stream(self, stream):
        pass

    def wait_event(self, event):
        pass

    def record_event(self, event=None):
        event = event or _Event()
        event.record(self)
        return event

    def query(self):
        return True

    def synchronize(self):
        pass


_DEFAULT_STREAM = _Stream()


@contextlib.contextmanager
def _stream_ctx(stream=None):
    yield stream


class _DeviceCtx(contextlib.nullcontext):
    def __init__(self, device=None):
        super().__init__()


def _fn(name, result=None, call=None):
    """A fresh function per patched name: torch._dynamo maps qualified names to function objects
    and rejects one object registered under two names."""

    def f(*args, **kwargs):
        return call() if call is not None else result

    f.__name__ = f.__qualname__ = name
    return f


def _local_world_size():
    return int(os.environ.get("LOCAL_WORLD_SIZE", "1"))


def _mem_total():
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return 0


def _props():
    return types.SimpleNamespace(name="CPU (cuda remap)", major=8, minor=0, total_memory=_mem_total(),
                                 multi_processor_count=os.cpu_count() or 1)


_CUDA_ATTRS = {
    **{n: _fn(n, True) for n in ("is_available", "is_initialized", "is_bf16_supported")},
    **{n: _fn(n) for n in ("init", "set_device", "synchronize", "empty_cache", "ipc_collect",
                           "manual_seed", "manual_seed_all", "seed", "seed_all", "set_rng_state",
                           "reset_peak_memory_stats", "reset_max_memory_allocated", "set_stream")},
    **{n: _fn(n, 0) for n in ("current_device", "memory_allocated", "max_memory_allocated",
                              "memory_reserved", "max_memory_reserved")},
    "device_count": _fn("device_count", call=_local_world_size),
    "get_rng_state": _fn("get_rng_state", call=torch.get_rng_state),
    "get_device_name": _fn("get_device_name", "CPU (cuda remap)"),
    "get_device_capability": _fn("get_device_capability", (8, 0)),
    "get_device_properties": _fn("get_device_properties", call=_props),
    "mem_get_info": _fn("mem_get_info", call=lambda: (_mem_total(), _mem_total())),
    "current_stream": _fn("current_stream", _DEFAULT_STREAM),
    "default_stream": _fn("default_stream", _DEFAULT_STREAM),
    "Stream": _Stream,
    "Event": _Event,
    "stream": _stream_ctx,
    "StreamContext": _stream_ctx,
    "device": _DeviceCtx,
}

_NVTX_ATTRS = {
    **{n: _fn(n, 0) for n in ("range_push", "range_pop", "range_start")},
    **{n: _fn(n) for n in ("mark", "range_end")},
}


# ---- AMP ------------------------------------------------------------------------------------

_RealAutocast = torch.amp.autocast_mode.autocast


class _Autocast(_RealAutocast):
    def __init__(self, device_type, dtype=None, enabled=True, cache_enabled=None):
        if device_type == "cuda":
            device_type = "cpu"
            if dtype is None:
                dtype = CUDA_AUTOCAST_DTYPE
        super().__init__(device_type, dtype=dtype, enabled=enabled, cache_enabled=cache_enabled)


class _CudaAmpAutocast(_Autocast):
    def __init__(self, enabled=True, dtype=torch.float16, cache_enabled=True):
        super().__init__("cuda", dtype=dtype, enabled=enabled, cache_enabled=cache_enabled)


class _GradScaler(torch.amp.GradScaler):
    def __init__(self, device="cuda", init_scale=2.0**16, growth_factor=2.0, backoff_factor=0.5,
                 growth_interval=2000, enabled=True):
        super().__init__(to_cpu_device(str(device)), init_scale, growth_factor, backoff_factor,
                         growth_interval, enabled)


class _CudaAmpGradScaler(_GradScaler):
    def __init__(self, init_scale=2.0**16, growth_factor=2.0, backoff_factor=0.5, growth_interval=2000, enabled=True):
        super().__init__("cpu", init_scale, growth_factor, backoff_factor, growth_interval, enabled)


def _cuda_custom_fwd(fwd=None, *, cast_inputs=None):
    return torch.amp.custom_fwd(fwd, device_type="cpu", cast_inputs=cast_inputs)


def _cuda_custom_bwd(bwd=None):
    return torch.amp.custom_bwd(bwd, device_type="cpu")


# ---- distributed / parallel -----------------------------------------------------------------

def _map_backend(backend):
    if isinstance(backend, str):
        return backend.replace("nccl", "gloo").replace("cuda", "cpu")
    return backend


class _DataParallel(torch.nn.DataParallel):
    """nn.DataParallel with no accelerator: torch's own CPU branch (just call the module)."""

    def __init__(self, module, device_ids=None, output_device=None, dim=0):
        torch.nn.Module.__init__(self)
        self.module = module
        self.device_ids = []
        self.dim = dim


class RemapHandle:
    """Undo record for ``install``; also a context manager."""

    def __init__(self):
        self._saved: list[tuple[object, str, object]] = []
        self._mode: TorchFunctionMode | None = None

    def patch(self, obj, name, value):
        self._saved.append((obj, name, getattr(obj, name, None)))
        setattr(obj, name, value)

    def uninstall(self):
        if self._mode is not None:
            self._mode.__exit__(None, None, None)
            self._mode = None
        for obj, name, old in reversed(self._saved):
            setattr(obj, name, old)
        self._saved.clear()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.uninstall()


def install() -> RemapHandle:
    h = RemapHandle()
    h.patch(torch, "device", _device)
    h.patch(torch, "Generator", _Generator)
    h.patch(torch.Tensor, "cuda", lambda self, device=None, non_blocking=False, **kw: self)
    h.patch(torch.Tensor, "pin_memory", lambda self, *a, **k: self)
    h.patch(torch.Tensor, "record_stream", lambda self, stream: None)
    for name, value in _CUDA_ATTRS.items():
        h.patch(torch.cuda, name, value)
    for name, value in _NVTX_ATTRS.items():
        h.patch(torch.cuda.nvtx, name, value)
    for obj in (torch, torch.amp):
        h.patch(obj, "autocast", _Autocast)
    h.patch(torch.amp, "GradScaler", _GradScaler)
    h.patch(torch.cuda.amp, "autocast", _CudaAmpAutocast)
    h.patch(torch.cuda.amp, "GradScaler", _CudaAmpGradScaler)
    h.patch(torch.cuda.amp, "custom_fwd", _cuda_custom_fwd)
    h.patch(torch.cuda.amp, "custom_bwd", _cuda_custom_bwd)

    real_set_default = torch.set_default_device
    h.patch(torch, "set_default_device", lambda d: real_set_default(to_cpu_device(d)))
    def _cpu_map_location(arguments: dict) -> None:
        map_location = arguments.get("map_location")
        if isinstance(map_location, dict):
            arguments["map_location"] = {k: to_cpu_device(v) for k, v in map_location.items()}
        elif map_location is not None and not callable(map_location):
            arguments["map_location"] = to_cpu_device(map_location)

    # by position or keyword: torch.load(f, "cuda:0"), dist.new_group(ranks, timeout, "nccl")
    h.patch(torch, "load", wrap_bound(torch.load, _cpu_map_location))

    def _gloo_backend(arguments: dict) -> None:
        if "backend" in arguments:
            arguments["backend"] = _map_backend(arguments["backend"])

    def _no_cuda_device_id(arguments: dict) -> None:
        _gloo_backend(arguments)
        if isinstance(arguments.get("device_id"), (_REAL_DEVICE, int)):
            arguments.pop("device_id")  # eager-init hint for a CUDA device; meaningless for gloo

    h.patch(dist, "init_process_group", wrap_bound(dist.init_process_group, _no_cuda_device_id))
    h.patch(dist, "new_group", wrap_bound(dist.new_group, _gloo_backend))
    from torch.distributed import device_mesh

    real_mesh = device_mesh.init_device_mesh
    h.patch(device_mesh, "init_device_mesh", lambda device_type, *a, **k: real_mesh(to_cpu_device(device_type), *a, **k))

    ddp_cls = torch.nn.parallel.DistributedDataParallel
    real_ddp_init = ddp_cls.__init__

    def _ddp_init(self, module, device_ids=None, output_device=None, *args, **kwargs):
        if all(p.device.type == "cpu" for p in module.parameters()):
            device_ids = output_device = None  # DDP rejects device_ids for CPU modules
        real_ddp_init(self, module, device_ids, output_device, *args, **kwargs)

    h.patch(ddp_cls, "__init__", _ddp_init)
    h.patch(torch.nn, "DataParallel", _DataParallel)
    h.patch(torch.nn.parallel, "DataParallel", _DataParallel)

    h._mode = _CudaToCpuMode()
    h._mode.__enter__()
    return h
