"""Contents of the emulated ``torch_npu.npu`` module (also registered as ``torch.npu``).

EMULATION: runs on CPU, no Ascend hardware or CANN involved. Mirrors the subset of
``torch_npu.npu.__all__`` (ascend-facts §b.1: the 88 names mapped from ``torch.cuda``, plus a few
NPU-only names such as ``NPUGraph``, ``mstx``, ``set_compile_mode``) that migrated code calls.
Runtime functions are no-ops or CPU equivalents; memory statistics are stubs returning 0;
``get_device_name()`` says ``"Ascend (emulated on CPU)"`` so logs never pass for real hardware.
"""

from __future__ import annotations

import collections
import os
from typing import Any

import torch

from ._device_state import STATE, _index
from .npu_streams import (  # noqa: F401  (re-exported: NPU_ALL)
    Event,
    NPUGraph,
    Stream,
    StreamContext,
    current_stream,
    default_stream,
    graph,
    graph_pool_handle,
    is_current_stream_capturing,
    make_graphed_callables,
    mstx,
    set_stream,
    stream,
)

EMULATED_DEVICE_NAME = "Ascend (emulated on CPU)"


# ---------------------------------------------------------------- device management (§b.1)
def is_available() -> bool:
    """Emulated ``torch.npu.is_available`` (§b.1): True — the emulated NPU is the CPU."""
    return True


def is_initialized() -> bool:
    """Emulated ``torch.npu.is_initialized`` (§b.1): always True."""
    return True


def init() -> None:
    """Emulated ``torch.npu.init`` (§b.1): no-op."""


def device_count() -> int:
    """Emulated ``torch.npu.device_count`` (§b.1): ``install(device_count=...)``, default 1."""
    return STATE.device_count


def set_device(device: Any) -> None:
    """Emulated ``torch.npu.set_device`` (§b.1): records the index for ``current_device()``.

    Any non-negative index is accepted (ranks of a CPU/gloo run may call ``set_device(local_rank)``
    even with ``device_count() == 1``); tensors stay on the CPU.
    """
    idx = _index(device)
    if idx < 0:
        raise ValueError(f"torch_npu emulation: invalid device index {idx}")
    STATE.current_device = idx


def current_device() -> int:
    """Emulated ``torch.npu.current_device`` (§b.1): the last index given to ``set_device``."""
    return STATE.current_device


class device:
    """Emulated ``torch.npu.device`` context manager (§b.1): switches ``current_device()``."""

    def __init__(self, device: Any) -> None:
        self.idx = -1 if device is None else _index(device)
        self.prev_idx = -1

    def __enter__(self) -> None:
        self.prev_idx = STATE.current_device
        if self.idx >= 0:
            STATE.current_device = self.idx

    def __exit__(self, *exc: Any) -> None:
        STATE.current_device = self.prev_idx


class device_of(device):
    """Emulated ``torch.npu.device_of`` (§b.1): ``device`` of a tensor (always the current one)."""

    def __init__(self, obj: Any) -> None:
        super().__init__(None)


def synchronize(device: Any = None) -> None:
    """Emulated ``torch.npu.synchronize`` (§b.1): no-op, CPU ops are synchronous."""


def get_device_name(device: Any = None) -> str:
    """Emulated ``torch.npu.get_device_name`` (§b.1): ``"Ascend (emulated on CPU)"``."""
    return EMULATED_DEVICE_NAME


class _DeviceProperties:
    """Emulated ``get_device_properties`` result: only the fields torch_npu fills (§b.1)."""

    def __init__(self) -> None:
        self.name = EMULATED_DEVICE_NAME
        self.total_memory = _total_memory()
        self.L2_cache_size = 0
        self.cube_core_num = 0
        self.vector_core_num = 0

    def __repr__(self) -> str:
        return (f"_NPUDeviceProperties(name='{self.name}', total_memory={self.total_memory // 2**20}MB, "
                f"L2_cache_size=0MB, cube_core_num=0, vector_core_num=0)")


def get_device_properties(device: Any = None) -> _DeviceProperties:
    """Emulated ``torch.npu.get_device_properties`` (§b.1): ``name, total_memory, L2_cache_size,
    cube_core_num, vector_core_num`` only — no ``major/minor``, as on the real device."""
    return _DeviceProperties()


def get_device_capability(device: Any = None):
    """Emulated ``torch.npu.get_device_capability`` (§b.1): ``None`` unless the env var
    ``TORCH_NPU_DEVICE_CAPABILITY`` (e.g. ``8.0``) is set, like the real function."""
    value = os.environ.get("TORCH_NPU_DEVICE_CAPABILITY")
    if not value:
        return None
    major, _, minor = value.partition(".")
    return int(major), int(minor or 0)


def can_device_access_peer(device: Any, peer_device: Any) -> bool:
    """Emulated ``torch.npu.can_device_access_peer`` (§b.1): True (one shared CPU memory)."""
    return True


def is_bf16_supported(including_emulation: bool = False) -> bool:
    """Emulated ``torch.npu.is_bf16_supported`` (§b.1): True (A2/A3 support bf16)."""
    return True


def utilization(device: Any = None) -> int:
    """Emulated ``torch.npu.utilization`` (§b.1): 0."""
    return 0


def get_sync_debug_mode() -> int:
    """Emulated ``torch.npu.get_sync_debug_mode`` (§b.1): 0."""
    return 0


def set_sync_debug_mode(debug_mode: Any) -> None:
    """Emulated ``torch.npu.set_sync_debug_mode`` (§b.1): no-op."""


def set_compile_mode(jit_compile: bool = False) -> None:
    """Emulated NPU-only ``torch.npu.set_compile_mode`` (§b.1, used in real ports §e): no-op."""


def set_option(option: Any) -> None:
    """Emulated NPU-only ``torch.npu.set_option`` (§b.1): no-op."""


def get_npu_overflow_flag() -> bool:
    """Emulated NPU-only ``torch.npu.get_npu_overflow_flag`` (§b.1, §e): False.

    Note: on A2 and later (inf/nan mode) the real function raises ("Unsupported api when
    soc_version >= Ascend910B1") unless overflow checking is forced.
    """
    return False


def clear_npu_overflow_flag() -> None:
    """Emulated NPU-only ``torch.npu.clear_npu_overflow_flag`` (§b.1): no-op."""


class _Hf32Flag:
    def __init__(self, default: bool) -> None:
        self.allow_hf32 = default


#: ``torch.npu.matmul.allow_hf32`` (default False) / ``torch.npu.conv.allow_hf32`` (default True),
#: numerics.md §1.1; flags only — CPU kernels never use HF32.
matmul = _Hf32Flag(False)
conv = _Hf32Flag(True)


# ---------------------------------------------------------------- RNG (§b.1)
def manual_seed(seed: int) -> None:
    """Emulated ``torch.npu.manual_seed`` (§b.1).

    The emulated NPU's random ops draw from the CPU default generator, so this seeds it
    (``torch.manual_seed``). Unlike real hardware it therefore also resets host randomness.
    """
    torch.manual_seed(int(seed))


def manual_seed_all(seed: int) -> None:
    """Emulated ``torch.npu.manual_seed_all`` (§b.1): same as :func:`manual_seed`."""
    torch.manual_seed(int(seed))


def seed() -> None:
    """Emulated ``torch.npu.seed`` (§b.1): ``torch.seed()``."""
    torch.seed()


def seed_all() -> None:
    """Emulated ``torch.npu.seed_all`` (§b.1): ``torch.seed()``."""
    torch.seed()


def initial_seed() -> int:
    """Emulated ``torch.npu.initial_seed`` (§b.1): ``torch.initial_seed()``."""
    return torch.initial_seed()


def get_rng_state(device: Any = "npu") -> torch.Tensor:
    """Emulated ``torch.npu.get_rng_state`` (§b.1): the CPU generator state."""
    return torch.get_rng_state()


def set_rng_state(new_state: torch.Tensor, device: Any = "npu") -> None:
    """Emulated ``torch.npu.set_rng_state`` (§b.1): sets the CPU generator state."""
    torch.set_rng_state(new_state)


def get_rng_state_all() -> list:
    """Emulated ``torch.npu.get_rng_state_all`` (§b.1)."""
    return [torch.get_rng_state()]


def set_rng_state_all(new_states: list) -> None:
    """Emulated ``torch.npu.set_rng_state_all`` (§b.1)."""
    for state in new_states:
        torch.set_rng_state(state)


default_generators = (torch.default_generator,)


# ---------------------------------------------------------------- memory stubs (§b.1)
def _total_memory() -> int:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):  # pragma: no cover - non-POSIX
        return 0


def empty_cache() -> None:
    """Emulated ``torch.npu.empty_cache`` (§b.1): no-op."""


def memory_allocated(device: Any = None) -> int:
    """Emulated ``torch.npu.memory_allocated`` (§b.1): stub, 0 (no device allocator on CPU)."""
    return 0


def max_memory_allocated(device: Any = None) -> int:
    """Emulated ``torch.npu.max_memory_allocated`` (§b.1): stub, 0."""
    return 0


def memory_reserved(device: Any = None) -> int:
    """Emulated ``torch.npu.memory_reserved`` (§b.1): stub, 0."""
    return 0


def max_memory_reserved(device: Any = None) -> int:
    """Emulated ``torch.npu.max_memory_reserved`` (§b.1): stub, 0."""
    return 0


memory_cached = memory_reserved
max_memory_cached = max_memory_reserved


def memory_stats(device: Any = None) -> collections.defaultdict[str, int]:
    """Emulated ``torch.npu.memory_stats`` (§b.1): stub; every key (e.g.
    ``"allocated_bytes.all.peak"``) reads 0."""
    return collections.defaultdict(int)


def memory_stats_as_nested_dict(device: Any = None) -> dict:
    """Emulated ``torch.npu.memory_stats_as_nested_dict`` (§b.1): stub, ``{}``."""
    return {}


def memory_snapshot() -> list:
    """Emulated ``torch.npu.memory_snapshot`` (§b.1): stub, ``[]``."""
    return []


def memory_summary(device: Any = None, abbreviated: bool = False) -> str:
    """Emulated ``torch.npu.memory_summary`` (§b.1): an explanatory string."""
    return "torch_npu emulation on CPU: no NPU memory statistics are available.\n"


def mem_get_info(device: Any = None) -> tuple:
    """Emulated ``torch.npu.mem_get_info`` (§b.1): (free, total) host memory in bytes."""
    total = _total_memory()
    try:
        free = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_AVPHYS_PAGES")
    except (ValueError, OSError, AttributeError):  # pragma: no cover
        free = total
    return free, total


def _noop(*args: Any, **kwargs: Any) -> None:
    """Emulated memory-statistics reset / memory-fraction setter (§b.1): no-op."""
    return None


reset_peak_memory_stats = reset_max_memory_allocated = reset_max_memory_cached = _noop
reset_accumulated_memory_stats = set_per_process_memory_fraction = _noop


def get_per_process_memory_fraction(device: Any = None) -> float:
    """Emulated ``torch.npu.get_per_process_memory_fraction`` (§b.1): 1.0."""
    return 1.0


# ---------------------------------------------------------------- autocast state (§b.2)
def get_autocast_dtype() -> torch.dtype:
    """Emulated ``torch_npu.npu.get_autocast_dtype`` (§b.2): the CPU autocast dtype."""
    return torch.get_autocast_dtype("cpu")


def set_autocast_dtype(dtype: torch.dtype) -> None:
    """Emulated ``torch_npu.npu.set_autocast_dtype`` (§b.2): sets the CPU autocast dtype."""
    torch.set_autocast_dtype("cpu", dtype)


def is_autocast_enabled() -> bool:
    """Emulated ``torch.npu.is_autocast_enabled`` (§b.2 autocast rule): CPU autocast state."""
    return torch.is_autocast_enabled("cpu")


NPU_ALL = [
    "is_available", "is_initialized", "init", "device_count", "set_device", "current_device", "device",
    "device_of", "synchronize", "get_device_name", "get_device_properties", "get_device_capability",
    "can_device_access_peer", "is_bf16_supported", "utilization", "get_sync_debug_mode",
    "set_sync_debug_mode", "set_compile_mode", "set_option", "get_npu_overflow_flag",
    "clear_npu_overflow_flag", "matmul", "conv", "manual_seed", "manual_seed_all", "seed", "seed_all",
    "initial_seed", "get_rng_state", "set_rng_state", "get_rng_state_all", "set_rng_state_all",
    "default_generators", "empty_cache", "memory_allocated", "max_memory_allocated", "memory_reserved",
    "max_memory_reserved", "memory_cached", "max_memory_cached", "memory_stats",
    "memory_stats_as_nested_dict", "memory_snapshot", "memory_summary", "mem_get_info",
    "reset_peak_memory_stats", "reset_max_memory_allocated", "reset_max_memory_cached",
    "reset_accumulated_memory_stats", "set_per_process_memory_fraction",
    "get_per_process_memory_fraction", "Stream", "Event", "current_stream", "default_stream",
    "set_stream", "StreamContext", "stream", "NPUGraph", "graph", "make_graphed_callables",
    "graph_pool_handle", "is_current_stream_capturing", "mstx", "get_autocast_dtype",
    "set_autocast_dtype", "is_autocast_enabled",
]
