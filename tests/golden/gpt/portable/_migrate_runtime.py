"""Device helpers for code migrated by ascend-migrate (`migrate fix --target portable`).

The fix writes this module once per migrated tree as `_migrate_runtime.py` and the migrated files
import from it: the same code then runs on CUDA, on Ascend NPUs (torch-npu) and on CPU-only hosts.
Its source is ascend-migrate's `migrator/fix/runtime_helpers/device.py`; rerunning the fix keeps it, and
never replaces it once you have edited it.
"""

import contextlib

import torch

with contextlib.suppress(ImportError):  # registers the Ascend "npu" device when torch-npu is installed
    import torch_npu  # noqa: F401


def _migrate_device(index=None):
    """The accelerator this process runs on (CUDA, Ascend NPU, ...) or the CPU. Added by ascend-migrate."""
    accelerator = torch.accelerator.current_accelerator() if torch.accelerator.is_available() else None
    device_type = accelerator.type if accelerator is not None else "cpu"
    if isinstance(index, (str, torch.device)):
        index = torch.device(index).index  # "cuda:1" -> 1: the type is this host's accelerator
    if index is None or device_type == "cpu":
        return torch.device(device_type)
    return torch.device(device_type, index)


def _migrate_accelerator_type():
    """The device type of the accelerator this process uses ("cuda", "npu", ...), None on a CPU-only host:
    `x.device.type == _migrate_accelerator_type()` is then False for every tensor, as `== "cuda"` was
    there. Added by ascend-migrate."""
    accelerator = torch.accelerator.current_accelerator() if torch.accelerator.is_available() else None
    return accelerator.type if accelerator is not None else None


def _migrate_backend():
    """The collective backend for this process's device (nccl, hccl, gloo). Added by ascend-migrate."""
    return torch.distributed.get_default_backend_for_device(_migrate_device())


def _migrate_device_module():
    """The runtime module of this process's accelerator (torch.cuda, torch.npu, ...), or a CPU
    stand-in: no-op synchronisation, seeding and memory statistics, wall-clock events. Added by ascend-migrate."""
    if torch.accelerator.is_available():
        return torch.get_device_module(torch.accelerator.current_accelerator())
    return _MIGRATE_CPU_RUNTIME


class _MigrateCpuRuntime:
    """torch.cuda-style runtime calls on a CPU-only host, where everything already runs in order.
    Added by ascend-migrate."""

    class Event:
        def __init__(self, enable_timing=False, blocking=False, interprocess=False):
            self.time = None

        def record(self, stream=None):
            import time

            self.time = time.perf_counter()

        def synchronize(self):
            pass

        def query(self):
            return True

        def wait(self, stream=None):
            pass

        def elapsed_time(self, end):
            return (end.time - self.time) * 1000.0

    ANSWERS = {
        "is_available": False, "device_count": 0, "is_initialized": True, "get_device_name": "cpu",
        "is_bf16_supported": True, "mem_get_info": (0, 0), "memory_allocated": 0, "max_memory_allocated": 0,
        "memory_reserved": 0, "max_memory_reserved": 0, "memory_cached": 0, "max_memory_cached": 0,
        "memory_stats": {}, "memory_summary": "", "current_device": 0,
    }
    NO_OPS = {
        "synchronize", "set_device", "manual_seed", "manual_seed_all", "seed", "seed_all", "empty_cache", "init",
        "reset_peak_memory_stats", "reset_max_memory_allocated", "reset_max_memory_cached", "ipc_collect",
        "set_rng_state_all", "set_per_process_memory_fraction",
    }

    def Stream(self, device=None, priority=0, **kwargs):
        return torch.cpu.Stream(priority)

    def stream(self, stream):
        return torch.cpu.stream(stream)

    def current_stream(self, device=None):
        return torch.cpu.current_stream()

    def device(self, index):
        import contextlib

        return contextlib.nullcontext()

    def get_rng_state(self, device=None):
        return torch.get_rng_state()

    def set_rng_state(self, state, device=None):
        torch.set_rng_state(state)

    def get_rng_state_all(self):
        return [torch.get_rng_state()]

    def __getattr__(self, name):
        if name in self.ANSWERS:
            value = self.ANSWERS[name]
            return lambda *args, **kwargs: value
        if name in self.NO_OPS:
            return lambda *args, **kwargs: None
        if name.endswith(("Tensor", "Storage")) and hasattr(torch, name):
            return getattr(torch, name)  # torch.cuda.FloatTensor -> the CPU tensor type
        raise AttributeError(f"_migrate_device_module().{name} has no CPU stand-in (added by ascend-migrate)")


_MIGRATE_CPU_RUNTIME = _MigrateCpuRuntime()
