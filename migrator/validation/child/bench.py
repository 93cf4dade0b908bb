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
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from ..records import DATA_PARALLEL, BenchJob
from .user_calls import clear_grads

if TYPE_CHECKING:
    import torch
    from torch.distributed.device_mesh import DeviceMesh

    from .protocol import Entry, Layers

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


def comm_share(events: Iterable[Any], step_mark: str = STEP_MARK) -> dict[str, Any]:
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

    def clipped(intervals: list[tuple[float, float]]) -> list[tuple[float, float]]:
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

    def walk(v: Any) -> None:
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
    from . import protocol
    from .errors import describe, failure_phase
    from .parallel import leave_process_group

    rank = int(os.environ.get("RANK", "0"))
    world = int(os.environ.get("WORLD_SIZE", "1"))
    status: dict[str, Any] = {"ok": False, "side": job.side, "rank": rank, "world_size": world}
    started = protocol.prepare(job.side, job.tree, job.entry, status)
    if started is None:
        return status
    repeat = _Repeat(job, started[0], started[1], status, rank, world)
    try:
        repeat.run()
        status["ok"] = True
    except _NonFinite as exc:
        status.update(phase="nan", error={"summary": str(exc)}, nan_step=repeat.step_no - 1)
    except Exception as exc:  # noqa: BLE001 - a crash of the program is a result
        status.update(phase=failure_phase(exc, job.tree), error=describe(exc, job.tree, during=repeat.phase))
    finally:
        leave_process_group()
    return status


class _NonFinite(Exception):
    pass


class _Repeat:
    """One benchmark repeat, step by step; ``phase`` and ``step_no`` say where a failure happened."""

    def __init__(self, job: BenchJob, entry: Entry, layers: Layers, status: dict[str, Any], rank: int,
                 world: int) -> None:
        self.job, self.entry, self.layers, self.status = job, entry, layers, status
        self.rank, self.world, self.device = rank, world, layers.device
        self.phase = "setup"
        self.step_no = 0

    def run(self) -> None:
        from . import flops

        job, status = self.job, self.status
        self._build()
        for _ in range(int(job.warmup)):
            self.phase = f"warm-up step {self.step_no}"
            self.checked(self.step(), "warm-up")
        self.phase = f"FLOP count (step {self.step_no})"
        total, per_op, loss = flops.count(self.step)
        self.checked(loss, "FLOP count")
        status["flops_per_step"] = total
        status["flops_by_op"] = per_op
        status["step_times"] = self._timed_steps()
        profile_steps = int(job.profile_steps)
        if profile_steps > 0:
            self.phase = f"profiled step {self.step_no}"
            status["comm_share"] = _profile(self.step, self.device, profile_steps, self.checked)
            if self.world == 1:
                status["comm_share"]["note"] = "one process: no collectives"
        status["samples_per_step"], status["tokens_per_step"] = batch_size(self.data)
        status["peak_memory"] = _peak_memory(self.device)

    def _build(self) -> None:
        """The process group (under torchrun or for a variant), the model as the stage runs it, its batch."""
        import torch
        import torch.distributed as dist

        from .. import determinism
        from . import execute

        job, device, status = self.job, self.device, self.status
        torch.set_num_threads(int(job.threads))
        determinism.seed_all(job.seed)
        if device != "cpu" and self.world > 1:
            getattr(torch, device).set_device(int(os.environ.get("LOCAL_RANK", "0")))
        mesh = None
        if self.world > 1 or job.variant:
            from torch.distributed.device_mesh import init_device_mesh

            dist.init_process_group(backend=self.layers.backend)
            mesh = init_device_mesh(device, (self.world,), mesh_dim_names=("dp" if job.stage == "S2" else "mp",))
        model = self.entry.make_model(dropout=0.0).to(device).train()
        if job.bf16_policy == "pure":
            model.to(torch.bfloat16)
        self.call, self.model = self._parallelize(model, mesh)
        self.data = execute.prepare_batch(self._batch(), device, "bf16", job.bf16_policy)
        self.args, self.kwargs = execute.model_inputs(self.entry, self.data)
        status["dtype"] = "bfloat16"
        status["device_name"] = _device_name(device)
        if device != "cpu":
            try:
                getattr(torch, device).reset_peak_memory_stats()
            except Exception:  # noqa: BLE001
                pass

    def _parallelize(self, model: torch.nn.Module, mesh: DeviceMesh | None) -> tuple[torch.nn.Module, torch.nn.Module]:
        """(what is called, the model inside it): the stage's variant, else the unwrapped model."""
        if not self.job.variant:
            self.status["how"] = "one process, the unwrapped model"
            return model, model
        from .parallel import _inner, apply_variant

        assert mesh is not None  # a variant always builds its process group (_build)
        call, self.status["how"] = apply_variant(self.entry, model, mesh, self.job.variant, True)
        return call, _inner(call)

    def _batch(self) -> Any:
        """This rank's micro-batch for a data-parallel variant, else the full batch."""
        from . import execute

        entry, step = self.entry, self.job.batch_step
        if self.job.variant in DATA_PARALLEL:
            return (entry.make_batch(step, self.rank, self.world) if entry.batch_takes_rank
                    else execute.split_batch(entry.batch(step), self.world)[self.rank])
        return entry.batch(step)

    def step(self) -> torch.Tensor:
        """One benchmarked step: forward + backward under the stage's bf16 policy."""
        from . import execute

        with execute.autocast("bf16", self.job.bf16_policy, self.device):
            out = self.call(*self.args, **self.kwargs)
            loss = self.entry.loss_fn(out, self.data)
        loss.backward()
        clear_grads(self.model, "model")
        return loss.detach()

    def _finite(self, loss: torch.Tensor) -> bool:
        import torch
        import torch.distributed as dist

        ok = torch.tensor([1.0 if bool(torch.isfinite(loss).all()) else 0.0])
        if dist.is_initialized():  # every rank stops together (outside the timed region)
            if self.layers.backend in ("nccl", "hccl"):
                ok = ok.to(self.device)
            dist.all_reduce(ok, op=dist.ReduceOp.MIN)
        return bool(ok.item() > 0)

    def checked(self, loss: torch.Tensor, what: str) -> None:
        """Count the step; a non-finite loss (on any rank) stops the repeat."""
        self.step_no += 1
        if not self._finite(loss):
            raise _NonFinite(f"non-finite loss at step {self.step_no - 1} ({what})")

    def _timed_steps(self) -> list[float]:
        times: list[float] = []
        for _ in range(int(self.job.steps)):
            self.phase = f"timed step {self.step_no}"
            _sync(self.device)
            t0 = time.perf_counter()
            loss = self.step()
            _sync(self.device)
            times.append(time.perf_counter() - t0)
            self.checked(loss, "timed")
        return times


def _profile(step: Callable[[], torch.Tensor], device: str, n: int,
             checked: Callable[[torch.Tensor, str], None]) -> dict[str, Any]:
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
