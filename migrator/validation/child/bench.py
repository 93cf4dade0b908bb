"""One benchmark repeat of one side of a stage (child side; ``kind: "bench"`` jobs).

Imported only by the worker when ``migrate validate --bench`` asked for it: without ``--bench``
no timing hook, FLOP counter or profiler is ever installed (tests/validation/test_bench_off.py).

A repeat: build the program (``make_model``, its batch, its ``parallelize`` for S2/S3 under
torchrun), ``warmup`` untimed steps, one step under ``FlopCounterMode`` (:mod:`.flops`),
``steps`` timed steps (device synchronised around each), then ``profile_steps`` steps under
``torch.profiler`` (``torch_npu.profiler`` on a real NPU) for the communication share: the union
of collective intervals (``gloo:all_reduce``, ``c10d::allgather_``, NCCL/HCCL kernels ...)
inside each step, per kind, over the step time. A benchmarked step is forward + backward under
the stage's bf16 policy; the optimizer step is not part of it. A non-finite loss stops the repeat
(``phase: "nan"``); a crash is ``phase: "run"``; a hang is the parent's timeout.
"""

from __future__ import annotations

import os
import re
import resource
import time
from typing import Any

from ..records import DATA_PARALLEL, BenchJob

KINDS = ("all-reduce", "all-gather", "reduce-scatter", "all-to-all")
_KIND_RE = (("reduce-scatter", re.compile(r"reduce_?scatter", re.I)),
            ("all-reduce", re.compile(r"all_?reduce", re.I)),
            ("all-gather", re.compile(r"all_?gather", re.I)),
            ("all-to-all", re.compile(r"all_?to_?all", re.I)))
_SKIP_RE = re.compile(r"record_param_comms|reducer::|ddp\.|ProcessGroup.*(init|barrier)", re.I)
STEP_MARK = "migrate_bench_step"


def collective_kind(name: str) -> str | None:
    """The collective kind of a profiler event name, or None."""
    if _SKIP_RE.search(name):
        return None
    for kind, pattern in _KIND_RE:
        if pattern.search(name):
            return kind
    return None


def _union(intervals: list[tuple[float, float]]) -> float:
    total = 0.0
    merged: tuple[float, float] | None = None  # the interval being grown
    for s, e in sorted(intervals):
        if merged is None or s > merged[1]:
            if merged is not None:
                total += merged[1] - merged[0]
            merged = (s, e)
        else:
            merged = (merged[0], max(merged[1], e))
    if merged is not None:
        total += merged[1] - merged[0]
    return total


def comm_share(events, step_mark: str = STEP_MARK) -> dict[str, Any]:
    """Collective time / step time from profiler events (``name``, ``time_range`` in µs).

    Only the parts of collective intervals inside a marked step count; intervals of one kind are
    merged (the CPU enqueue op and the worker-thread / device work overlap), ``total`` merges all
    kinds."""
    steps: list[tuple[float, float]] = []
    coll: dict[str, list[tuple[float, float]]] = {k: [] for k in KINDS}
    for e in events:
        name = e.name
        tr = e.time_range
        if name == step_mark:
            steps.append((tr.start, tr.end))
            continue
        kind = collective_kind(name)
        if kind is not None and tr.end > tr.start:
            coll[kind].append((tr.start, tr.end))
    step_time = sum(e - s for s, e in steps)
    if not steps or step_time <= 0:
        return {"total": 0.0, **{k: 0.0 for k in KINDS}, "profiled_steps": 0}

    def clipped(intervals):
        out = []
        for s, e in intervals:
            for a, b in steps:
                lo, hi = max(s, a), min(e, b)
                if hi > lo:
                    out.append((lo, hi))
        return out

    share = {k: round(_union(clipped(v)) / step_time, 6) for k, v in coll.items()}
    share["total"] = round(_union(clipped([iv for v in coll.values() for iv in v])) / step_time, 6)
    share["profiled_steps"] = len(steps)
    return share


def _sync(device: str) -> None:
    import torch

    if device != "cpu":
        getattr(torch, device).synchronize()


def _device_name(device: str) -> str:
    import torch

    if device == "cpu":
        import platform

        return f"cpu ({platform.processor() or platform.machine()}, {torch.get_num_threads()} thread(s))"
    try:
        return str(getattr(torch, device).get_device_name())
    except Exception:  # noqa: BLE001
        return device


def _peak_memory(device: str) -> dict[str, Any]:
    import torch

    if device != "cpu":
        try:
            return {"bytes": int(getattr(torch, device).max_memory_allocated()), "kind": f"{device} max_memory_allocated"}
        except Exception:  # noqa: BLE001
            pass
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # Linux: KiB
    return {"bytes": int(rss), "kind": "host peak RSS (CPU run: process memory, not device memory)"}


def batch_size(batch: Any) -> tuple[int | None, int | None]:
    """(samples, tokens) of a batch: samples = leading size of its first tensor; tokens = the
    element count of its first integer tensor of rank >= 2 (token ids), else None."""
    import torch

    tensors: list[Any] = []

    def walk(v):
        if isinstance(v, torch.Tensor):
            tensors.append(v)
        elif isinstance(v, dict):
            for x in v.values():
                walk(x)
        elif isinstance(v, (list, tuple)):
            for x in v:
                walk(x)

    walk(batch)
    if not tensors:
        return None, None
    samples = int(tensors[0].shape[0]) if tensors[0].dim() else 1
    ids = next((t for t in tensors if not t.is_floating_point() and t.dim() >= 2), None)
    return samples, (int(ids.numel()) if ids is not None else None)


def run_bench(job: BenchJob) -> dict[str, Any]:
    """One repeat; returns the status dict (``ok``, ``phase`` on failure, the measurements)."""
    from .. import determinism
    from . import execute, flops, protocol
    from .errors import describe, failure_phase

    rank = int(os.environ.get("RANK", "0"))
    world = int(os.environ.get("WORLD_SIZE", "1"))
    side, tree = job.side, job.tree
    status: dict[str, Any] = {"ok": False, "side": side, "rank": rank, "world_size": world}
    started = protocol.prepare(side, tree, job.entry, status)
    if started is None:
        return status
    entry, layers = started
    device = layers.device

    import torch
    import torch.distributed as dist

    phase = "setup"
    step_no = 0
    try:
        torch.set_num_threads(int(job.threads))
        determinism.seed_all(job.seed)
        variant = job.variant
        if device != "cpu" and world > 1:
            getattr(torch, device).set_device(int(os.environ.get("LOCAL_RANK", "0")))
        mesh = None
        if world > 1 or variant:
            from torch.distributed.device_mesh import init_device_mesh

            dist.init_process_group(backend=layers.backend)
            mesh = init_device_mesh(device, (world,), mesh_dim_names=("dp" if job.stage == "S2" else "mp",))
        bf16_policy = job.bf16_policy
        model = entry.make_model(dropout=0.0).to(device).train()
        if bf16_policy == "pure":
            model.to(torch.bfloat16)
        call = model
        status["how"] = "one process, the unwrapped model"
        if variant:
            from .parallel import _inner, apply_variant

            call, status["how"] = apply_variant(entry, model, mesh, variant, True)
            model = _inner(call)
            if variant in DATA_PARALLEL:
                batch = (entry.make_batch(job.batch_step, rank, world) if entry.batch_takes_rank
                         else execute.split_batch(entry.batch(job.batch_step), world)[rank])
            else:
                batch = entry.batch(job.batch_step, 0, 1) if entry.batch_takes_rank else entry.batch(job.batch_step)
        else:
            batch = entry.batch(job.batch_step, 0, 1) if entry.batch_takes_rank else entry.batch(job.batch_step)
        data = execute.prepare_batch(batch, device, "bf16", bf16_policy)
        samples, tokens = batch_size(data)
        args, kwargs = execute.model_inputs(entry, data)
        status["dtype"] = "bfloat16"
        status["device_name"] = _device_name(device)
        if device != "cpu":
            try:
                getattr(torch, device).reset_peak_memory_stats()
            except Exception:  # noqa: BLE001
                pass

        def step():
            with execute.autocast("bf16", bf16_policy, device):
                out = call(*args, **kwargs)
                loss = entry.loss_fn(out, data)
            loss.backward()
            model.zero_grad(set_to_none=True)
            return loss.detach()

        def finite(loss) -> bool:
            ok = torch.tensor([1.0 if bool(torch.isfinite(loss).all()) else 0.0])
            if dist.is_initialized():  # every rank stops together (outside the timed region)
                if layers.backend in ("nccl", "hccl"):
                    ok = ok.to(device)
                dist.all_reduce(ok, op=dist.ReduceOp.MIN)
            return bool(ok.item() > 0)

        def checked(loss, what):
            nonlocal step_no
            step_no += 1
            if not finite(loss):
                raise _NonFinite(f"non-finite loss at step {step_no - 1} ({what})")

        for _ in range(int(job.warmup)):
            phase = f"warm-up step {step_no}"
            checked(step(), "warm-up")
        phase = f"FLOP count (step {step_no})"
        total, per_op, loss = flops.count(step)
        checked(loss, "FLOP count")
        status["flops_per_step"] = total
        status["flops_by_op"] = per_op
        times: list[float] = []
        for _ in range(int(job.steps)):
            phase = f"timed step {step_no}"
            _sync(device)
            t0 = time.perf_counter()
            loss = step()
            _sync(device)
            times.append(time.perf_counter() - t0)
            checked(loss, "timed")
        status["step_times"] = times
        profile_steps = int(job.profile_steps)
        if profile_steps > 0:
            phase = f"profiled step {step_no}"
            status["comm_share"] = _profile(step, device, profile_steps, checked)
            if world == 1:
                status["comm_share"]["note"] = "one process: no collectives"
        status["samples_per_step"] = samples
        status["tokens_per_step"] = tokens
        status["peak_memory"] = _peak_memory(device)
        status["ok"] = True
    except _NonFinite as exc:
        status.update(phase="nan", error={"summary": str(exc)}, nan_step=step_no - 1)
    except Exception as exc:  # noqa: BLE001 - a crash of the program is a result
        status.update(phase=failure_phase(exc, tree), error=describe(exc, tree, during=phase))
    finally:
        from .parallel import leave_process_group

        leave_process_group()
    return status


class _NonFinite(Exception):
    pass


def _profile(step, device: str, n: int, checked) -> dict[str, Any]:
    import torch
    from torch.profiler import ProfilerActivity, record_function

    if device == "npu":
        import torch_npu  # noqa: F401 - the real package: its profiler sees HCCL on the device

        profiler = torch_npu.profiler.profile(activities=[torch_npu.profiler.ProfilerActivity.CPU,
                                                          torch_npu.profiler.ProfilerActivity.NPU])
    else:
        activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device == "cuda" else [])
        profiler = torch.profiler.profile(activities=activities)
    losses = []
    with profiler as prof:
        for _ in range(n):
            with record_function(STEP_MARK):
                loss = step()
                _sync(device)
            losses.append(loss)
    for loss in losses:
        checked(loss, "profiled")
    return comm_share(prof.events())
