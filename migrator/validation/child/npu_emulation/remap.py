"""Device, backend and autocast remapping for the emulated ``torch_npu`` (npu → cpu, hccl → gloo).

This is the inverse of what ``torch_npu.contrib.transfer_to_npu`` does on real hardware
(ascend-facts §b.2 device-string rule, §b.3 NCCL→HCCL rule): there, ``"cuda"`` arguments of a
fixed list of Python callables are rewritten to ``"npu"``; here the *same list* of callables is
wrapped so that ``"npu"`` arguments become ``"cpu"`` and ``"hccl"`` becomes ``"gloo"``.

Why wrap Python callables instead of ``torch.utils.rename_privateuse1_backend("npu")``:

* the rename is process-global and irreversible (it may be called once per process), so tests
  could not uninstall it and a later real ``import torch_npu`` in the same process would clash;
* a renamed PrivateUse1 device still needs a backend (allocator, copy and compute kernels). Without
  a C++ extension every tensor would have to be a ``__torch_dispatch__`` wrapper around a CPU
  tensor: slow, and every op would go through Python dispatch. That is a lot of machinery only to
  have ``tensor.device.type == "npu"``;
* the validation goal is *CPU numerics of the migrated code*; plain CPU tensors give exactly the
  CPU kernels, bit-identical to the reference side.

Consequences (documented in :mod:`migrator.validation.child.npu_emulation`): ``torch.device("npu:1")``
returns a real ``torch.device("cpu")`` (index dropped, so ``t.device == torch.device("npu")`` is
true for every CPU tensor); ``x.device.type`` is ``"cpu"``, never ``"npu"``; a reference taken
with ``from torch import zeros`` *before* :func:`install` is not wrapped.
"""

from __future__ import annotations

import functools
import re
import sys
from collections.abc import Callable, Iterable
from typing import Any

import torch

from ..bound_args import wrap_bound
from ._patch import PatchSet, PostImportHook

_NPU_RE = re.compile(r"^\s*npu(:\d+)?\s*$")

#: The 47 ``torch.*`` callables that transfer_to_npu wraps with its device rule (ascend-facts §b.2).
#: Names absent from the running torch (e.g. ``_sparse_csr_tensor_unsafe`` in 2.13) are skipped.
TORCH_DEVICE_CALLABLES = (
    "logspace randint hann_window rand full_like ones_like rand_like randperm arange frombuffer "
    "normal _empty_per_channel_affine_quantized empty_strided empty_like scalar_tensor tril_indices "
    "bartlett_window ones sparse_coo_tensor randn kaiser_window tensor triu_indices as_tensor zeros "
    "randint_like full eye _sparse_csr_tensor_unsafe empty _sparse_coo_tensor_unsafe blackman_window "
    "zeros_like range sparse_csr_tensor randn_like from_file _cudnn_init_dropout_state "
    "_empty_affine_quantized linspace hamming_window empty_quantized _pin_memory load "
    "set_default_device get_device_module sparse_compressed_tensor"
).split()

#: ``Tensor`` methods with a ``device=`` keyword that transfer_to_npu wraps (§b.2).
TENSOR_NEW_METHODS = ("new_empty", "new_empty_strided", "new_full", "new_ones", "new_tensor", "new_zeros")

_DEVICE_KWARGS = ("device", "device_type")


# ----------------------------------------------------------------------------------------------
# value-level remapping
# ----------------------------------------------------------------------------------------------
def is_npu_string(value: Any) -> bool:
    """True for ``"npu"`` / ``"npu:<n>"`` (exact match, unlike transfer_to_npu's substring test, §b.2)."""
    return isinstance(value, str) and _NPU_RE.match(value) is not None


def _is_plain_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def remap_device(value: Any, allow_int: bool = True) -> Any:
    """Map an NPU device spec to ``"cpu"`` (ascend-facts §b.2, inverted).

    ``"npu"``/``"npu:N"`` → ``"cpu"``; an ``int`` (the current accelerator's index; under torch_npu
    that is ``npu:N``) → ``"cpu"`` when ``allow_int``; anything else (other strings, real
    ``torch.device`` objects, ``None``, dtypes) is returned unchanged.
    """
    if isinstance(value, str):
        return "cpu" if _NPU_RE.match(value) else value
    if allow_int and _is_plain_int(value):
        return "cpu"
    return value


def is_npu_like(value: Any) -> bool:
    """True if ``value`` designates the (emulated) NPU (§b.2): npu string, int index or a cpu ``torch.device``."""
    if is_npu_string(value) or _is_plain_int(value):
        return True
    return isinstance(value, _REAL_DEVICE) and value.type == "cpu"


def remap_map_location(value: Any) -> Any:
    """``torch.load(map_location=...)``: strings/ints remapped; dict *values* remapped, keys (saved
    location tags such as ``"npu:0"`` from a real-NPU checkpoint) kept so they still match (§b.2)."""
    if isinstance(value, dict):
        return {k: remap_device(v) for k, v in value.items()}
    return remap_device(value)


def remap_backend(value: Any) -> Any:
    """``"hccl"``/``"lccl"`` → ``"gloo"``; ``"npu:hccl"`` → ``"cpu:gloo"``; duplicates merged
    (``"cpu:gloo,npu:hccl"`` → ``"cpu:gloo"``). Inverse of §b.3; other values unchanged."""
    if not isinstance(value, str):
        return value
    if ":" not in value and "," not in value:
        return "gloo" if value.strip().lower() in ("hccl", "lccl") else value
    parts = []
    for part in value.split(","):
        dev, sep, backend = part.partition(":")
        dev = "cpu" if dev.strip().lower() == "npu" else dev.strip()
        backend = "gloo" if backend.strip().lower() in ("hccl", "lccl") else backend.strip()
        item = f"{dev}{sep}{backend}"
        if item not in parts:
            parts.append(item)
    return ",".join(parts)


def _remap_args(args: tuple, int_positional: bool) -> tuple:
    for a in args:
        if isinstance(a, str) or (int_positional and _is_plain_int(a)):
            break
    else:
        return args
    return tuple(remap_device(a, allow_int=int_positional) for a in args)


def wrap_device_callable(fn: Callable, *, int_positional: bool = False) -> Callable:
    """Wrap ``fn`` so ``device=``/``device_type=`` keywords and exact npu-string positionals map to cpu.

    ``int`` keywords always map (``device=0`` → cpu); ``int`` positionals only when
    ``int_positional`` (``Tensor.to``/``Module.to``), as in transfer_to_npu (§b.2).
    """

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        if kwargs:
            for key in _DEVICE_KWARGS:
                if key in kwargs:
                    kwargs[key] = remap_device(kwargs[key])
        if args:
            args = _remap_args(args, int_positional)
        return fn(*args, **kwargs)

    wrapper.__npu_emulation_wrapped__ = fn  # type: ignore[attr-defined]
    return wrapper


# ----------------------------------------------------------------------------------------------
# torch.device / torch.Generator proxies
# ----------------------------------------------------------------------------------------------
_REAL_DEVICE = torch.device
_REAL_GENERATOR = torch.Generator


class _ProxyMeta(type):
    """Metaclass so that ``isinstance(x, torch.device)`` keeps working with the proxy installed."""

    _real: type

    def __instancecheck__(cls, obj: Any) -> bool:
        return isinstance(obj, cls._real)

    def __subclasscheck__(cls, sub: type) -> bool:
        return sub is cls or issubclass(sub, cls._real)

    def __repr__(cls) -> str:
        return repr(cls._real)


class DeviceProxy(metaclass=_ProxyMeta):
    """Stands in for ``torch.device`` while the emulation is installed (ascend-facts §a, §b.2).

    ``torch.device("npu")``, ``torch.device("npu:1")``, ``torch.device("npu", 1)``,
    ``torch.device(type="npu", index=0)`` and ``torch.device(0)`` all return a *real*
    ``torch.device("cpu")``; the index is dropped so that ``tensor.device == torch.device("npu:0")``
    holds for CPU tensors (CPU tensors carry no index). Every other form is passed to the real
    constructor. ``isinstance(d, torch.device)`` and pickling keep working (the real object is
    returned; pickles reference ``torch.device`` by name).
    """

    _real = _REAL_DEVICE

    def __new__(cls, *args: Any, **kwargs: Any):
        first = args[0] if args else kwargs.get("type")
        if is_npu_string(first) or (_is_plain_int(first) and len(args) <= 1 and not kwargs):
            return _REAL_DEVICE("cpu")
        return _REAL_DEVICE(*args, **kwargs)


DeviceProxy.__module__ = "torch"
DeviceProxy.__qualname__ = DeviceProxy.__name__ = "device"


class GeneratorProxy(metaclass=_ProxyMeta):
    """Stands in for ``torch.Generator``: ``torch.Generator(device="npu")`` → CPU generator
    (transfer_to_npu installs a device-rewriting Generator subclass, ascend-facts §b.2)."""

    _real = _REAL_GENERATOR

    def __new__(cls, device: Any = "cpu"):
        return _REAL_GENERATOR(device=remap_device(device))


GeneratorProxy.__module__ = "torch"
GeneratorProxy.__qualname__ = GeneratorProxy.__name__ = "Generator"


# ----------------------------------------------------------------------------------------------
# installation
# ----------------------------------------------------------------------------------------------
def _tensor_npu(self, device=None, non_blocking=False, memory_format=torch.preserve_format):
    """Emulated ``Tensor.npu()`` (registered by torch_npu, ascend-facts §a): a move to CPU."""
    return self.to("cpu", non_blocking=non_blocking, memory_format=memory_format)


def _tensor_is_npu(self) -> bool:
    """Emulated ``Tensor.is_npu`` (§a): CPU tensors stand for NPU tensors, so True for them."""
    return self.device.type == "cpu"


def _module_npu(self, device=None):
    """Emulated ``nn.Module.npu()`` (§a): parameters and buffers stay on / move to CPU."""
    return self._apply(lambda t: t.to("cpu"))


def _tensor_pin_memory(self, device=None):
    """Emulated ``Tensor.pin_memory`` (wrapped by transfer_to_npu, §b.2).

    A CPU-only torch raises "Cannot access accelerator device"; pinning has no numerical effect,
    so the tensor itself is returned (``is_pinned()`` stays False).
    """
    return self


def apply(patches: PatchSet, npu_module: Any, stream_type: type) -> None:
    """Install every remap of this module into ``torch`` through ``patches`` (§b.2, §b.3, inverted)."""
    # torch.* factories and friends (§b.2)
    for name in TORCH_DEVICE_CALLABLES:
        fn = getattr(torch, name, None)
        if fn is None or name in ("load", "get_device_module"):
            continue
        patches.setattr(torch, name, wrap_device_callable(fn), f"torch.{name}")

    original_load = torch.load

    @functools.wraps(original_load)
    def load(*args, **kwargs):
        """Emulated ``torch.load`` (§b.2): ``map_location`` npu → cpu."""
        if "map_location" in kwargs:
            kwargs["map_location"] = remap_map_location(kwargs["map_location"])
        elif len(args) > 1:
            args = (args[0], remap_map_location(args[1])) + tuple(args[2:])
        return original_load(*args, **kwargs)

    patches.setattr(torch, "load", load, "torch.load")

    original_get_device_module = torch.get_device_module

    @functools.wraps(original_get_device_module)
    def get_device_module(device=None):
        """Emulated ``torch.get_device_module`` (§b.2): ``"npu"`` → the emulated ``torch.npu``."""
        if is_npu_string(device):
            return npu_module
        return original_get_device_module(device)

    patches.setattr(torch, "get_device_module", get_device_module, "torch.get_device_module")

    for mod_name, fn_name in (("fft", "fftfreq"), ("fft", "rfftfreq")):
        mod = getattr(torch, mod_name)
        patches.setattr(mod, fn_name, wrap_device_callable(getattr(mod, fn_name)), f"torch.{mod_name}.{fn_name}")

    import torch.utils._device as _device_mod

    patches.setattr(
        _device_mod.DeviceContext,
        "__init__",
        wrap_device_callable(_device_mod.DeviceContext.__init__),
        "torch.utils._device.DeviceContext.__init__",
    )

    # torch.device / torch.Generator
    patches.setattr(torch, "device", DeviceProxy, "torch.device")
    patches.setattr(torch, "Generator", GeneratorProxy, "torch.Generator")

    # Tensor methods
    T = torch.Tensor
    for name in TENSOR_NEW_METHODS:
        patches.setattr(T, name, wrap_device_callable(getattr(T, name)), f"torch.Tensor.{name}")
    patches.setattr(T, "to", wrap_device_callable(T.to, int_positional=True), "torch.Tensor.to")
    patches.setattr(T, "pin_memory", _tensor_pin_memory, "torch.Tensor.pin_memory")
    patches.setattr(T, "npu", _tensor_npu, "torch.Tensor.npu")
    patches.setattr(T, "is_npu", property(_tensor_is_npu), "torch.Tensor.is_npu")

    original_record_stream = T.record_stream

    @functools.wraps(original_record_stream)
    def record_stream(self, stream):
        """``Tensor.record_stream`` (§b.1 streams): no-op for an emulated ``torch.npu.Stream``."""
        if isinstance(stream, stream_type):
            return None
        return original_record_stream(self, stream)

    patches.setattr(T, "record_stream", record_stream, "torch.Tensor.record_stream")

    # nn.Module
    M = torch.nn.Module
    patches.setattr(M, "to", wrap_device_callable(M.to, int_positional=True), "torch.nn.Module.to")
    patches.setattr(M, "to_empty", wrap_device_callable(M.to_empty), "torch.nn.Module.to_empty")
    patches.setattr(M, "npu", _module_npu, "torch.nn.Module.npu")

    _apply_autocast(patches)
    _apply_distributed(patches)


def _remap_key(key: str, fn: Callable[[Any], Any]) -> Callable[[dict[str, Any]], None]:
    def transform(arguments: dict[str, Any]) -> None:
        if key in arguments:
            arguments[key] = fn(arguments[key])

    return transform


AMP_DEFAULT: dict[str, torch.dtype] = {"dtype": torch.float16}  # the emulated device's autocast default (install)


def _apply_autocast(patches: PatchSet) -> None:
    """``torch.autocast("npu")``/``torch.amp.autocast(device_type="npu")`` → cpu, plus the autocast
    state functions and ``GradScaler("npu")`` (transfer_to_npu patches the same set, §b.2)."""
    from torch.amp import autocast_mode, grad_scaler

    ac = autocast_mode.autocast

    def npu_autocast(arguments: dict[str, Any]) -> None:
        # torch.autocast("npu") without a dtype is fp16 on the device, not the CPU's bf16 default
        if remap_device(arguments.get("device_type")) != arguments.get("device_type") and arguments.get("dtype") is None:
            arguments["dtype"] = AMP_DEFAULT["dtype"]
        _remap_key("device_type", remap_device)(arguments)

    patches.setattr(ac, "__init__", wrap_bound(ac.__init__, npu_autocast), "torch.amp.autocast.__init__")
    for name in ("is_autocast_enabled", "set_autocast_enabled", "get_autocast_dtype", "set_autocast_dtype"):
        fn = getattr(torch, name, None)
        if fn is not None:
            patches.setattr(torch, name, wrap_device_callable(fn), f"torch.{name}")
    for owner, owner_name in ((torch.amp, "torch.amp"), (autocast_mode, "torch.amp.autocast_mode")):
        for name in ("custom_fwd", "custom_bwd", "is_autocast_available"):
            fn = owner.__dict__.get(name)
            if fn is not None:
                patches.setattr(owner, name, wrap_device_callable(fn), f"{owner_name}.{name}")
    gs = grad_scaler.GradScaler
    patches.setattr(
        gs, "__init__", wrap_bound(gs.__init__, _remap_key("device", remap_device)),
        "torch.amp.GradScaler.__init__",
    )


def _drop_if_npu(value: Any) -> Any:
    return None if is_npu_like(value) else value


def _drop_ids_if_npu(value: Any) -> Any:
    if isinstance(value, Iterable) and not isinstance(value, (str, bytes)):
        items = list(value)
        if items and all(is_npu_like(v) for v in items):
            return None
    return value


def _apply_distributed(patches: PatchSet) -> None:
    """hccl → gloo in ``init_process_group``/``new_group`` (inverse of §b.3) and the npu device
    arguments of DDP/FSDP/DeviceMesh (§b.2) dropped or mapped to cpu, because gloo and CPU modules
    reject accelerator ids (``device_id`` "must be an accelerator with an index", DDP
    ``device_ids`` "only work with ... GPU modules")."""
    import torch.distributed as dist

    if not dist.is_available():
        return
    from torch.distributed import distributed_c10d as c10d

    def pg_transform(arguments: dict[str, Any]) -> None:
        if "backend" in arguments:
            arguments["backend"] = remap_backend(arguments["backend"])
        if "device_id" in arguments:
            arguments["device_id"] = _drop_if_npu(arguments["device_id"])

    for name in ("init_process_group", "new_group"):
        original = getattr(c10d, name)
        wrapped = wrap_bound(original, pg_transform)
        patches.setattr(c10d, name, wrapped, f"torch.distributed.{name}")
        if getattr(dist, name, None) is original:
            patches.setattr(dist, name, wrapped)

    def is_hccl_available() -> bool:
        """Emulated ``torch.distributed.is_hccl_available`` (§a): True when gloo is available."""
        return dist.is_gloo_available()

    patches.setattr(dist, "is_hccl_available", is_hccl_available, "torch.distributed.is_hccl_available")

    from torch.nn.parallel import DistributedDataParallel as DDP

    def ddp_transform(arguments: dict[str, Any]) -> None:
        if "device_ids" in arguments:
            arguments["device_ids"] = _drop_ids_if_npu(arguments["device_ids"])
        if "output_device" in arguments:
            arguments["output_device"] = _drop_if_npu(arguments["output_device"])

    patches.setattr(DDP, "__init__", wrap_bound(DDP.__init__, ddp_transform),
                    "torch.nn.parallel.DistributedDataParallel.__init__")

    def patch_fsdp(fsdp_module: Any) -> None:
        FSDP = getattr(fsdp_module, "FullyShardedDataParallel", None)
        if FSDP is not None and not hasattr(FSDP.__init__, "__npu_emulation_wrapped__"):
            patches.setattr(FSDP, "__init__", wrap_bound(FSDP.__init__, _remap_key("device_id", _drop_if_npu)),
                            "torch.distributed.fsdp.FullyShardedDataParallel.__init__")

    # importing torch.distributed.fsdp costs ~1 s: patch now if loaded, else when user code imports it
    if "torch.distributed.fsdp" in sys.modules:
        patch_fsdp(sys.modules["torch.distributed.fsdp"])
    else:
        hook = PostImportHook("torch.distributed.fsdp", patch_fsdp)
        hook.install()
        patches.add_undo(hook.remove)

    try:
        from torch.distributed import device_mesh as dm
    except ImportError:  # pragma: no cover
        return
    original_init_mesh = dm.init_device_mesh
    wrapped_init_mesh = wrap_bound(original_init_mesh, _remap_key("device_type", remap_device))
    patches.setattr(dm, "init_device_mesh", wrapped_init_mesh, "torch.distributed.device_mesh.init_device_mesh")
    if getattr(dist, "init_device_mesh", None) is original_init_mesh:
        patches.setattr(dist, "init_device_mesh", wrapped_init_mesh)
    patches.setattr(dm.DeviceMesh, "__init__",
                    wrap_bound(dm.DeviceMesh.__init__, _remap_key("device_type", remap_device)),
                    "torch.distributed.device_mesh.DeviceMesh.__init__")
