"""`migrate plan --measure`, the child side (torch only here): GEMM TFLOP/s per dtype over a few shapes, a large
copy's memory bandwidth, and collective bus bandwidth across the local devices (2 CPU processes on gloo,
NCCL on CUDA, HCCL on NPU). Prints one JSON line; the parent (`measure.py`) turns it into a profile.
"""

from __future__ import annotations

import importlib.util
import json
import os
import sys
import tempfile
import time
from typing import Any

# small on CPU (the test runs it on 2 cores); on an accelerator large enough to reach the peak
GEMM_SIZES = {"cpu": (128, 256, 512), "accel": (2048, 4096, 8192)}
COPY_MB = {"cpu": 64, "accel": 2048}
COLLECTIVE_MB = {"cpu": (1, 8), "accel": (64, 256)}
DTYPES = ("bf16", "fp16", "fp32")
MIN_SECONDS = 0.05  # each timing repeats until at least this long (and at least twice)


def backend() -> tuple[str, str]:
    """(device type, collective backend): NPU when torch_npu is installed and sees a device, then CUDA, then CPU."""
    import torch

    if importlib.util.find_spec("torch_npu"):
        import torch_npu  # noqa: F401  - registers torch.npu

        if torch.npu.is_available():  # type: ignore[attr-defined]
            return "npu", "hccl"
    if torch.cuda.is_available():
        return "cuda", "nccl"
    return "cpu", "gloo"


def _sync(kind: str) -> None:
    import torch

    if kind != "cpu":
        getattr(torch, kind).synchronize()


def _timed(fn: Any, kind: str) -> float:
    fn()  # warm-up
    _sync(kind)
    reps, start = 0, time.perf_counter()
    while reps < 2 or time.perf_counter() - start < MIN_SECONDS:
        fn()
        reps += 1
        _sync(kind)
    return (time.perf_counter() - start) / reps


def gemm(kind: str, sizes: tuple[int, ...]) -> dict[str, dict[str, float]]:
    import torch

    out: dict[str, dict[str, float]] = {}
    for name in DTYPES:
        dtype = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}[name]
        out[name] = {}
        for n in sizes:
            a = torch.randn(n, n, device=kind).to(dtype)
            out[name][f"{n}x{n}x{n}"] = 2 * n ** 3 / _timed(lambda a=a: torch.mm(a, a), kind) / 1e12
    return out


def copy_GBps(kind: str, megabytes: int) -> float:
    import torch

    src = torch.empty(megabytes * 2 ** 20, dtype=torch.uint8, device=kind)
    dst = torch.empty_like(src)
    return 2 * src.numel() / _timed(lambda: dst.copy_(src), kind) / 1e9  # read + write


BUS_FACTOR = {"all_reduce": lambda n: 2 * (n - 1) / n, "all_gather": lambda n: (n - 1) / n,
              "reduce_scatter": lambda n: (n - 1) / n, "all_to_all": lambda n: (n - 1) / n}


def _collective_rank(rank: int, world: int, kind: str, store: str, sizes: tuple[int, ...], out: str) -> None:
    import torch
    import torch.distributed as dist

    device = f"{kind}:{rank}" if kind != "cpu" else "cpu"
    if kind != "cpu":
        getattr(torch, kind).set_device(rank)
    dist.init_process_group(backend()[1], init_method=f"file://{store}", rank=rank, world_size=world)
    found: dict[str, dict[str, float]] = {}
    for mb in sizes:
        n = mb * 2 ** 20 // 4
        full = torch.ones(n, device=device)
        part = torch.ones(n // world, device=device)
        spare = torch.empty_like(full)
        ops = {"all_reduce": (dist.all_reduce, full), "all_gather": (dist.all_gather_into_tensor, full, part),
               "reduce_scatter": (dist.reduce_scatter_tensor, part, full),
               "all_to_all": (dist.all_to_all_single, spare, full)}
        for op, (fn, *tensors) in ops.items():
            try:
                seconds = _timed_together(fn, tensors, kind)
            except (RuntimeError, NotImplementedError, ValueError):  # e.g. a backend without this collective
                continue
            found.setdefault(op, {})[f"{mb} MB"] = n * 4 / seconds * BUS_FACTOR[op](world) / 1e9
    if rank == 0:
        with open(out, "w", encoding="utf-8") as fh:
            json.dump(found, fh)
    dist.destroy_process_group()


def _timed_together(fn: Any, tensors: list[Any], kind: str, reps: int = 5) -> float:
    """A fixed count on every rank (a rank that stopped on its own clock would leave the others waiting)."""
    import torch.distributed as dist

    fn(*tensors)
    dist.barrier()
    _sync(kind)
    start = time.perf_counter()
    for _ in range(reps):
        fn(*tensors)
    _sync(kind)
    dist.barrier()
    return (time.perf_counter() - start) / reps


def collectives(kind: str, sizes: tuple[int, ...]) -> tuple[int, dict[str, dict[str, float]]]:
    import torch
    import torch.multiprocessing as mp

    world = 2 if kind == "cpu" else max(getattr(torch, kind).device_count(), 1)
    if world < 2:
        return world, {}
    with tempfile.TemporaryDirectory() as tmp:
        store, out = os.path.join(tmp, "store"), os.path.join(tmp, "out.json")
        mp.start_processes(_collective_rank, args=(world, kind, store, sizes, out), nprocs=world,
                           start_method="spawn")
        with open(out, encoding="utf-8") as fh:
            return world, json.load(fh)


def device_facts(kind: str, world: int) -> dict[str, Any]:
    import torch

    versions: dict[str, str] = {"torch": str(torch.__version__)}
    if kind == "npu":
        import torch_npu

        versions["torch_npu"] = getattr(torch_npu, "__version__", "unknown")
        versions["cann"] = _cann_version()
    if kind == "cpu":
        memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / world
        name = f"CPU ({os.cpu_count()} cores, {world} processes)"
    else:
        props = getattr(torch, kind).get_device_properties(0)
        memory, name = props.total_memory, str(props.name)
        if kind == "cuda":
            versions["cuda"] = str(torch.version.cuda)
    return {"device": name, "kind": kind, "memory_bytes": memory, "versions": versions}


def _cann_version() -> str:
    """CANN's version as data: the toolkit's version.cfg / ascend_toolkit_install.info, never executed."""
    home = os.environ.get("ASCEND_HOME_PATH") or os.environ.get("ASCEND_TOOLKIT_HOME") or \
        "/usr/local/Ascend/ascend-toolkit/latest"
    for name in ("version.cfg", "ascend_toolkit_install.info", os.path.join("compiler", "version.info")):
        try:
            with open(os.path.join(home, name), encoding="utf-8", errors="replace") as fh:
                for line in fh:
                    key, _, value = line.partition("=")
                    if "version" in key.lower() and value.strip():
                        return value.strip().strip('"[]')
        except OSError:
            continue
    return "unknown"


def main() -> dict[str, Any]:
    kind, coll = backend()
    size = "cpu" if kind == "cpu" else "accel"
    world, found = collectives(kind, COLLECTIVE_MB[size])
    return {**device_facts(kind, world), "backend": coll, "world": world,
            "gemm_tflops": gemm(kind, GEMM_SIZES[size]), "copy_GBps": copy_GBps(kind, COPY_MB[size]),
            "bus_GBps": found}


if __name__ == "__main__":
    try:
        print(json.dumps(main()))
    except Exception as exc:  # noqa: BLE001 - any failure is reported to the parent as data
        print(json.dumps({"error": f"{type(exc).__name__}: {exc}"}))
    sys.stdout.flush()
