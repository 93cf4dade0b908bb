"""S0: the migrated parallel plan at the real target world size on the ``fake`` process group.

One process plays the last rank of a world of W (8, 64, 384, ...; the last rank sees the uneven
remainders). ``fake`` collectives move no data (numerics.md §2(d)), so this checks plans, never
numbers:

* the mesh builds (``dp`` × ``tp``; ``tp`` = ``--plan-tp``, default 2 when the program declares a
  ``tp`` plan);
* ``parallelize`` builds each declared plan (``tp`` on the tp sub-mesh, ``ep`` and ``dp`` on the
  dp sub-mesh; a program without ``parallelize`` gets the harness's DDP / FSDP2, like S2);
* heads / experts / hidden sizes divide: attention head counts by tp, expert lists by ep,
  Megatron-style ``tp_shard`` weights by ``tp × parts``;
* local shapes and placements as declared: DTensor local shapes against their placements,
  ``tp_shard`` weights at 1/tp of the dimension, expert lists at 1/ep of their length, every other
  parameter replicated at its full shape;
* every collective is issued: one forward/backward with the Python collectives counted. To keep
  data-dependent control flow alive (MoE split sizes), collectives are completed as if every rank
  held this rank's data (an all-to-all returns this rank's own chunk from every peer); DDP's C++
  reducer gets a comm hook that issues the all-reduce and completes it the same way.
"""

from __future__ import annotations

import functools
import time
from collections import Counter
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from ..records import PlanJob

if TYPE_CHECKING:
    import torch
    import torch.distributed as dist
    from torch.distributed.device_mesh import DeviceMesh

    from .protocol import Entry

HEAD_ATTRS = ("n_head", "n_heads", "num_heads", "num_attention_heads", "n_kv_head", "num_key_value_heads")
COLLECTIVES = ("all_reduce", "all_gather", "all_gather_into_tensor", "all_gather_single", "reduce_scatter_tensor",
               "reduce_scatter_single", "reduce_scatter",
               "all_to_all_single", "all_to_all", "broadcast", "reduce", "barrier")
VARIANT_OF_STAGE = {"dp": "ddp", "fsdp": "fsdp2", "tp": "tp", "ep": "ep"}
# a plan: its label and the (stage, sub-mesh) steps that build it
Plan = tuple[str, list[tuple[str, "DeviceMesh"]]]
Check = dict[str, Any]


class CollectiveShim:
    """Counts Python-level collectives and completes them symmetrically (see the module docstring)."""

    def __init__(self) -> None:
        self.counts: dict[str, int] = {}
        self._saved: list[tuple[Any, str, Any]] = []

    def install(self) -> CollectiveShim:
        import torch.distributed as dist
        from torch.distributed import distributed_c10d as c10d

        for name in COLLECTIVES:
            real = getattr(dist, name, None)
            if real is None:
                continue
            wrapped = self._wrap(name, real)
            for owner in (dist, c10d):
                if getattr(owner, name, None) is real:
                    self._saved.append((owner, name, real))
                    setattr(owner, name, wrapped)
        return self

    def uninstall(self) -> None:
        for owner, name, real in reversed(self._saved):
            setattr(owner, name, real)
        self._saved.clear()

    def _wrap(self, name: str, real: Callable[..., Any]) -> Callable[..., Any]:
        shim = self

        @functools.wraps(real)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            shim.counts[name] = shim.counts.get(name, 0) + 1
            result = real(*args, **kwargs)
            try:
                shim._complete(name, args, kwargs)
            except Exception:  # noqa: BLE001 - values only; shapes were checked by the real call
                pass
            return result

        return wrapper

    @staticmethod
    def _complete(name: str, args: Sequence[Any], kwargs: dict[str, Any]) -> None:
        import torch
        import torch.distributed as dist

        group = kwargs.get("group")
        me = dist.get_rank(group) if group is not None else dist.get_rank()
        n = dist.get_world_size(group) if group is not None else dist.get_world_size()
        with torch.no_grad():
            if name == "all_to_all_single":
                out, inp = args[0], args[1]
                out_splits = kwargs.get("output_split_sizes", args[2] if len(args) > 2 else None)
                in_splits = kwargs.get("input_split_sizes", args[3] if len(args) > 3 else None)
                chunks = list(inp.split(in_splits)) if in_splits else list(inp.chunk(n))
                mine = chunks[me]
                sizes = list(out_splits) if out_splits else [out.shape[0] // n] * n
                if all(s == mine.shape[0] for s in sizes):
                    out.copy_(torch.cat([mine] * n) if n else out)
            elif name in ("all_gather_into_tensor", "all_gather_single"):
                out, inp = args[0], args[1]
                out.copy_(torch.cat([inp.reshape(-1)] * n).view_as(out))
            elif name == "all_gather":
                for t in args[0]:
                    t.copy_(args[1])
            elif name in ("reduce_scatter_tensor", "reduce_scatter_single"):
                out, inp = args[0], args[1]
                out.copy_(inp.reshape(-1).chunk(n)[me].view_as(out))


def _ddp_hook(state: dist.ProcessGroup, bucket: dist.GradBucket) -> torch.futures.Future[torch.Tensor]:
    """Comm hook for DDP on the fake process group: issue the all-reduce, complete it locally."""
    import torch
    import torch.distributed as dist

    dist.all_reduce(bucket.buffer(), group=state)
    fut: torch.futures.Future[torch.Tensor] = torch.futures.Future()
    fut.set_result(bucket.buffer())
    return fut


def _check(name: str, ok: bool, message: str = "", status_if_bad: str = "fail") -> Check:
    return {"check": name, "status": "pass" if ok else status_if_bad, "message": message}


def _declared(entry: Entry, stage: str, model: torch.nn.Module, mesh: DeviceMesh) -> tuple[bool, str | None]:
    from .parallel import _declares

    try:
        declared, result = _declares(entry, stage, model, mesh)
    except Exception as exc:  # noqa: BLE001 - declared but broken: the plan check reports it
        return True, f"{type(exc).__name__}: {exc}"
    return declared, None


def _shape_checks(full: torch.nn.Module, inner: torch.nn.Module, tp: int, ep: int,
                  ep_lists: dict[str, tuple[int, int]]) -> list[Check]:
    """Local shapes and placements of ``inner``'s parameters against the full model."""
    full_shapes = {n: tuple(p.shape) for n, p in full.named_parameters()}
    problems: list[str] = []
    kinds: Counter[str] = Counter()
    for name, p in inner.named_parameters():
        kind, found = _parameter_shape(name, p, full_shapes, tp, ep_lists)
        kinds[kind] += 1
        problems += found
    msg = (f"{kinds['tp_shard']} tp_shard, {kinds['DTensor']} DTensor, {kinds['expert']} expert-local, "
           f"{kinds['replicated']} replicated parameter(s)" + (": " + "; ".join(problems[:4]) if problems else ""))
    return [_check("local shapes and placements as declared", not problems, msg)]


def _parameter_shape(name: str, p: torch.nn.Parameter, full_shapes: dict[str, tuple[int, ...]], tp: int,
                     ep_lists: dict[str, tuple[int, int]]) -> tuple[str, list[str]]:
    """(how ``p`` is laid out: expert / DTensor / tp_shard / replicated, its shape problems)."""
    try:
        from torch.distributed.tensor import DTensor
    except ImportError:  # pragma: no cover
        DTensor = None  # type: ignore[misc, assignment]
    ep_prefix = next((pre for pre in ep_lists if name.startswith(pre + ".")), None)
    if ep_prefix is not None:
        idx, _, tail = name[len(ep_prefix) + 1:].partition(".")
        want = full_shapes.get(f"{ep_prefix}.{int(idx)}.{tail}")
        return "expert", [] if want == tuple(p.shape) else [f"{name}: local {tuple(p.shape)} != expert shape {want}"]
    if DTensor is not None and isinstance(p, DTensor):
        return "DTensor", _dtensor_problems(name, p, full_shapes.get(name))
    if hasattr(p, "tp_shard"):
        return "tp_shard", _tp_shard_problems(name, p, full_shapes.get(name), tp)
    want = full_shapes.get(name)
    if want is not None and tuple(p.shape) != want:
        return "replicated", [f"{name}: local {tuple(p.shape)} != full {want} (no sharding declared)"]
    return "replicated", []


def _dtensor_problems(name: str, p: Any, want: tuple[int, ...] | None) -> list[str]:
    from torch.distributed.tensor._utils import compute_local_shape_and_global_offset

    problems = []
    if tuple(p.shape) != want:
        problems.append(f"{name}: global shape {tuple(p.shape)} != {want}")
    local = tuple(p.to_local().shape)
    expected, _ = compute_local_shape_and_global_offset(p.shape, p.device_mesh, p.placements)
    if local != tuple(expected):
        problems.append(f"{name}: local shape {local} != {tuple(expected)} for placements {p.placements}")
    return problems


def _tp_shard_problems(name: str, p: torch.nn.Parameter, want: tuple[int, ...] | None, tp: int) -> list[str]:
    """A Megatron-style ``p.tp_shard = (dim, parts)`` weight at 1/tp of its dimension."""
    dim, parts = p.tp_shard  # type: ignore[attr-defined]
    if want is None:
        return [f"{name}: not in the full model"]
    problems = []
    if want[dim] % (parts * tp):
        problems.append(f"{name}: dim {dim} of size {want[dim]} does not divide into {parts} part(s) x tp {tp}")
    shard_shape = list(want)
    shard_shape[dim] = want[dim] // tp
    if tuple(p.shape) != tuple(shard_shape):
        problems.append(f"{name}: local {tuple(p.shape)} != {tuple(shard_shape)} (1/{tp} of dim {dim})")
    return problems


def _divisibility(full: torch.nn.Module, tp: int, ep: int, ep_lists: dict[str, tuple[int, int]],
                  declared_ep: bool) -> list[Check]:
    problems = []
    if tp > 1:
        for name, m in full.named_modules():
            for attr in HEAD_ATTRS:
                value = getattr(m, attr, None)
                if isinstance(value, int) and value % tp:
                    problems.append(f"{name or '<root>'}.{attr}={value} over tp {tp}")
    if declared_ep and ep > 1:
        shrunk = set(ep_lists)
        if not shrunk:
            problems.append(f"no expert list was split over ep {ep}")
        for path, (full_len, local_len) in ep_lists.items():
            if full_len % ep or local_len * ep != full_len:
                problems.append(f"{path}: {full_len} experts over ep {ep} -> {local_len} local")
    return [_check("heads / experts / hidden sizes divide", not problems, "; ".join(problems[:4]))]


def _run_plan_step(entry: Entry, pmodel: torch.nn.Module, batch: Any,
                   shim: CollectiveShim) -> tuple[str, dict[str, int]]:
    """One forward/backward of the parallelized model; (a note, the collectives it issued)."""
    from torch.nn.parallel import DistributedDataParallel as DDP

    from .execute import model_inputs, prepare_batch

    note = ""
    if isinstance(pmodel, DDP):
        try:
            # through a lambda: DDP compares a hook's annotations with its classes, and this module's are strings
            pmodel.register_comm_hook(pmodel.process_group, lambda state, bucket: _ddp_hook(state, bucket))
        except RuntimeError as exc:
            note = f"DDP already has a comm hook ({exc}); its collectives are not issued on the fake group"
    before = dict(shim.counts)
    data = prepare_batch(batch, "cpu", "fp32", "amp")
    args, kwargs = model_inputs(entry, data)
    out = pmodel(*args, **kwargs)
    loss = entry.loss_fn(out, data)
    if not note:
        loss.backward()
    issued = {k: v - before.get(k, 0) for k, v in shim.counts.items() if v - before.get(k, 0)}
    return note, issued


def run_plan(job: PlanJob) -> dict[str, Any]:
    """S0 as the last rank of the fake world; returns the status being built (frozen into a ``PlanStatus``)."""
    from . import protocol
    from .errors import describe, failure_phase

    status: dict[str, Any] = {"ok": False, "checks": [], "notes": [], "bench": {}}
    t0 = time.perf_counter()
    prepared = protocol.prepare("migrated", job.tree, job.entry, status, seed=job.seed,
                                threads=job.threads, determinism_device="cpu")
    if prepared is None:
        return status

    import torch.distributed as dist
    from torch.testing._internal.distributed.fake_pg import FakeStore

    shim = CollectiveShim()
    try:
        dist.init_process_group("fake", store=FakeStore(), rank=int(job.world_size) - 1, world_size=int(job.world_size))
        shim.install()
        if not _PlanChecks(job, prepared[0], status, shim).run():
            status["ok"] = True
            return status
        status["bench"] = {"seconds_in_child": round(time.perf_counter() - t0, 2)}
        status["ok"] = True
    except Exception as exc:  # noqa: BLE001
        if failure_phase(exc, job.tree) == "harness":  # our code raised: exit 2, never the program's fault
            status.update(phase="harness", error=describe(exc, job.tree, during="plan check"))
        else:
            status["checks"].append(_check("plan check", False, describe(exc, job.tree)["summary"]))
            status["ok"] = True
    finally:
        shim.uninstall()
        if dist.is_initialized():
            dist.destroy_process_group()
    try:
        import resource

        status["bench"]["max_rss_mb"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)
    except (ImportError, OSError):  # pragma: no cover
        pass
    return status


class _PlanChecks:
    """The checks of every declared plan on the fake world of ``job.world_size`` ranks, into ``status``."""

    def __init__(self, job: PlanJob, entry: Entry, status: dict[str, Any], shim: CollectiveShim) -> None:
        self.job, self.entry, self.status, self.shim = job, entry, status, shim
        self.checks: list[Check] = status["checks"]
        self.world = int(job.world_size)

    def run(self) -> bool:
        """Every plan checked; False when the mesh does not build (then nothing else is checked)."""
        from torch.distributed.device_mesh import init_device_mesh

        from .. import determinism
        from . import execute
        from .parallel import _module_lists

        job, entry, world = self.job, self.entry, self.world
        determinism.seed_all(job.seed)
        self.full = entry.make_model(dropout=0.0)
        self.weights = execute.round_weights(self.full)
        self.full_lists = _module_lists(self.full)
        flat = init_device_mesh("cpu", (world,), mesh_dim_names=("world",))
        self.declared = {stage: _declared(entry, stage, self._fresh_model(), flat)[0]
                         for stage in ("dp", "fsdp", "tp", "ep")}
        self.status["declared"] = [s for s, d in self.declared.items() if d]
        tp = int(job.tp or (2 if self.declared["tp"] else 1))
        if world % tp:
            self.checks.append(_check("mesh builds", False, f"world size {world} does not divide by tp {tp}"))
            return False
        dp = world // tp
        mesh = init_device_mesh("cpu", (dp, tp), mesh_dim_names=("dp", "tp")) if tp > 1 else \
            init_device_mesh("cpu", (world,), mesh_dim_names=("dp",))
        dp_mesh = mesh["dp"] if tp > 1 else mesh
        self.checks.append(_check("mesh builds", True, f"{world} ranks as dp {dp} x tp {tp}" if tp > 1
                                  else f"{world} ranks (dp)"))
        summaries = [summary for plan in self._plans(mesh, dp_mesh)
                     if (summary := self._check_plan(plan, dp_mesh, tp, dp)) is not None]
        rank = world - 1
        self.status["summary"] = (f"world {world} (rank {rank} of dp {dp} x tp {tp}); " if tp > 1
                                  else f"world {world} (rank {rank}); ") \
            + ("; ".join(summaries) if summaries else "no plan ran")
        return True

    def _fresh_model(self) -> torch.nn.Module:
        from . import execute

        return execute.build_model(self.entry, self.weights, "cpu", "fp32", "amp")

    def _plans(self, mesh: DeviceMesh, dp_mesh: DeviceMesh) -> list[Plan]:
        """The plans to check: the model-parallel stages the program declares (with its dp), else DDP, and FSDP2."""
        declared, parallelize = self.declared, self.entry.parallelize
        plans: list[Plan] = []
        mp = [(s, mesh["tp"] if s == "tp" else dp_mesh) for s in ("tp", "ep") if declared[s]]
        if mp:
            plans.append(("+".join(s for s, _ in mp) + ("+dp" if declared["dp"] else ""),
                          mp + ([("dp", dp_mesh)] if declared["dp"] else [])))
        elif declared["dp"] or parallelize is None:
            plans.append(("dp (DDP)", [("dp", dp_mesh)]))
        generic_ok = parallelize is None or declared["dp"] or declared["fsdp"]
        if "fsdp2" in self.job.dp_variants and (declared["fsdp"] or generic_ok) and not mp:
            plans.append(("fsdp2", [("fsdp", dp_mesh)]))
        return plans

    def _check_plan(self, plan: Plan, dp_mesh: DeviceMesh, tp: int, dp: int) -> str | None:
        """Build one plan, check its layout, run one step; its summary, or None when it did not build or run."""
        from .parallel import _inner, _module_lists

        label, steps = plan
        pmodel = self._build(label, steps)
        if pmodel is None:
            return None
        inner = _inner(pmodel)
        declared_tp = tp if self.declared["tp"] else 1
        ep = dp if self.declared["ep"] else 1
        ep_lists = {p: (self.full_lists[p], n) for p, n in _module_lists(inner).items()
                    if p in self.full_lists and n < self.full_lists[p]}
        self.checks.append(_check(f"{label}: plan builds", True, f"on {self.world} ranks"))
        self.checks += [dict(c, check=f"{label}: {c['check']}") for c in
                        _divisibility(self.full, declared_tp, ep, ep_lists, self.declared["ep"])]
        self.checks += [dict(c, check=f"{label}: {c['check']}") for c in
                        _shape_checks(self.full, inner, declared_tp, ep, ep_lists)]
        return self._check_collectives(label, steps, pmodel, dp_mesh, dp)

    def _build(self, label: str, steps: list[tuple[str, DeviceMesh]]) -> torch.nn.Module | None:
        """The model parallelized by ``steps``; None when the program's plan raised (a failed check)."""
        from .errors import describe, failure_phase
        from .parallel import apply_variant

        pmodel = self._fresh_model()
        try:
            for stage, sub in steps:
                pmodel, _how = apply_variant(self.entry, pmodel, sub, VARIANT_OF_STAGE[stage], True)
        except Exception as exc:  # noqa: BLE001
            if failure_phase(exc, self.job.tree) == "harness":
                raise
            self.checks.append(_check(f"{label}: plan builds", False, describe(exc, self.job.tree)["summary"]))
            return None
        return pmodel

    def _check_collectives(self, label: str, steps: list[tuple[str, DeviceMesh]], pmodel: torch.nn.Module,
                           dp_mesh: DeviceMesh, dp: int) -> str | None:
        """One forward/backward on the fake group: every collective issued."""
        from .errors import describe, failure_phase

        entry, step = self.entry, self.job.batch_step
        batch = entry.make_batch(step, dp_mesh.get_local_rank(), dp) if entry.batch_takes_rank else entry.batch(step)
        try:
            note, issued = _run_plan_step(entry, pmodel, batch, self.shim)
        except Exception as exc:  # noqa: BLE001
            if failure_phase(exc, self.job.tree) == "harness":
                raise
            self.checks.append(_check(f"{label}: forward/backward on the fake group", False,
                                      describe(exc, self.job.tree)["summary"]))
            return None
        total = sum(issued.values())
        expect = any(s in ("tp", "ep", "dp", "fsdp") for s, _ in steps)
        text = ", ".join(f"{k} {v}" for k, v in sorted(issued.items())) or "none"
        if note:
            self.status["notes"].append(f"{label}: {note}")
        self.checks.append(_check(f"{label}: every collective issued", total > 0 or not expect,
                                  f"{total} collective call(s): {text}" if total else "no collective was issued",
                                  status_if_bad="fail"))
        return f"{label}: {total} collectives"
