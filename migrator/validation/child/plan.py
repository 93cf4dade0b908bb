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
from typing import Any

from ..records import PlanJob

HEAD_ATTRS = ("n_head", "n_heads", "num_heads", "num_attention_heads", "n_kv_head", "num_key_value_heads")
COLLECTIVES = ("all_reduce", "all_gather", "all_gather_into_tensor", "all_gather_single", "reduce_scatter_tensor",
               "reduce_scatter_single", "reduce_scatter",
               "all_to_all_single", "all_to_all", "broadcast", "reduce", "barrier")


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

    def _wrap(self, name: str, real):
        shim = self

        @functools.wraps(real)
        def wrapper(*args, **kwargs):
            shim.counts[name] = shim.counts.get(name, 0) + 1
            result = real(*args, **kwargs)
            try:
                shim._complete(name, args, kwargs)
            except Exception:  # noqa: BLE001 - values only; shapes were checked by the real call
                pass
            return result

        return wrapper

    @staticmethod
    def _complete(name: str, args, kwargs) -> None:
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


def _ddp_hook(state, bucket):
    """Comm hook for DDP on the fake process group: issue the all-reduce, complete it locally."""
    import torch
    import torch.distributed as dist

    dist.all_reduce(bucket.buffer(), group=state)
    fut: torch.futures.Future[torch.Tensor] = torch.futures.Future()
    fut.set_result(bucket.buffer())
    return fut


def _check(name: str, ok: bool, message: str = "", status_if_bad: str = "fail") -> dict[str, Any]:
    return {"check": name, "status": "pass" if ok else status_if_bad, "message": message}


def _declared(entry, stage: str, model, mesh) -> tuple[bool, str | None]:
    from .parallel import _declares

    try:
        declared, result = _declares(entry, stage, model, mesh)
    except Exception as exc:  # noqa: BLE001 - declared but broken: the plan check reports it
        return True, f"{type(exc).__name__}: {exc}"
    return declared, None


def _module_lists(model) -> dict[str, int]:
    import torch

    return {n: len(m) for n, m in model.named_modules() if isinstance(m, torch.nn.ModuleList)}


def _shape_checks(full, inner, tp: int, ep: int, ep_lists: dict[str, tuple[int, int]]) -> list[dict[str, Any]]:
    """Local shapes and placements of ``inner``'s parameters against the full model."""
    try:
        from torch.distributed.tensor import DTensor
        from torch.distributed.tensor._utils import compute_local_shape_and_global_offset
    except ImportError:  # pragma: no cover
        DTensor = compute_local_shape_and_global_offset = None  # type: ignore[misc, assignment]
    full_shapes = {n: tuple(p.shape) for n, p in full.named_parameters()}
    problems: list[str] = []
    sharded = replicated = dtensors = experts = 0
    for name, p in inner.named_parameters():
        ep_prefix = next((pre for pre in ep_lists if name.startswith(pre + ".")), None)
        if ep_prefix is not None:
            experts += 1
            full_len, local_len = ep_lists[ep_prefix]
            idx, _, tail = name[len(ep_prefix) + 1:].partition(".")
            global_name = f"{ep_prefix}.{int(idx)}.{tail}"
            if full_shapes.get(global_name) != tuple(p.shape):
                problems.append(f"{name}: local {tuple(p.shape)} != expert shape {full_shapes.get(global_name)}")
            continue
        want = full_shapes.get(name)
        if DTensor is not None and isinstance(p, DTensor):
            dtensors += 1
            if tuple(p.shape) != want:
                problems.append(f"{name}: global shape {tuple(p.shape)} != {want}")
            local = tuple(p.to_local().shape)
            expected, _ = compute_local_shape_and_global_offset(p.shape, p.device_mesh, p.placements)
            if local != tuple(expected):
                problems.append(f"{name}: local shape {local} != {tuple(expected)} for placements {p.placements}")
            continue
        if hasattr(p, "tp_shard"):
            sharded += 1
            dim, parts = p.tp_shard
            if want is None:
                problems.append(f"{name}: not in the full model")
                continue
            if want[dim] % (parts * tp):
                problems.append(f"{name}: dim {dim} of size {want[dim]} does not divide into {parts} part(s) x tp {tp}")
            shard_shape = list(want)
            shard_shape[dim] = want[dim] // tp
            if tuple(p.shape) != tuple(shard_shape):
                problems.append(f"{name}: local {tuple(p.shape)} != {tuple(shard_shape)} (1/{tp} of dim {dim})")
            continue
        replicated += 1
        if want is not None and tuple(p.shape) != want:
            problems.append(f"{name}: local {tuple(p.shape)} != full {want} (no sharding declared)")
    msg = (f"{sharded} tp_shard, {dtensors} DTensor, {experts} expert-local, {replicated} replicated parameter(s)"
           + (": " + "; ".join(problems[:4]) if problems else ""))
    return [_check("local shapes and placements as declared", not problems, msg)]


def _divisibility(full, tp: int, ep: int, ep_lists, full_lists, declared_ep: bool) -> list[dict[str, Any]]:
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


def _run_plan_step(entry, pmodel, inner, batch, shim: CollectiveShim) -> tuple[dict[str, Any], dict[str, int]]:
    from torch.nn.parallel import DistributedDataParallel as DDP

    from .execute import model_inputs, prepare_batch

    note = ""
    if isinstance(pmodel, DDP):
        try:
            pmodel.register_comm_hook(pmodel.process_group, _ddp_hook)
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
    return {"note": note}, issued


def run_plan(job: PlanJob) -> dict[str, Any]:
    from .. import determinism
    from . import execute, protocol
    from .errors import describe, failure_phase

    W = int(job.world_size)
    rank = W - 1
    status: dict[str, Any] = {"ok": False, "checks": [], "notes": [], "bench": {}}
    t0 = time.perf_counter()
    prepared = protocol.prepare("migrated", job.tree, job.entry, status, seed=job.seed,
                                threads=job.threads, determinism_device="cpu")
    if prepared is None:
        return status
    entry = prepared[0]

    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh
    from torch.testing._internal.distributed.fake_pg import FakeStore

    checks: list[dict[str, Any]] = status["checks"]
    shim = CollectiveShim()
    try:
        dist.init_process_group("fake", store=FakeStore(), rank=rank, world_size=W)
        shim.install()
        determinism.seed_all(job.seed)
        full = entry.make_model(dropout=0.0)
        weights = execute.round_weights(full)
        full_lists = _module_lists(full)
        step = job.batch_step

        flat = init_device_mesh("cpu", (W,), mesh_dim_names=("world",))
        declared = {}
        for stage in ("dp", "fsdp", "tp", "ep"):
            model = execute.build_model(entry, weights, "cpu", "fp32", "amp")
            declared[stage], _ = _declared(entry, stage, model, flat)
        status["declared"] = [s for s, d in declared.items() if d]
        tp = int(job.tp or (2 if declared["tp"] else 1))
        if W % tp:
            checks.append(_check("mesh builds", False, f"world size {W} does not divide by tp {tp}"))
            status["ok"] = True
            return status
        dp = W // tp
        mesh = init_device_mesh("cpu", (dp, tp), mesh_dim_names=("dp", "tp")) if tp > 1 else \
            init_device_mesh("cpu", (W,), mesh_dim_names=("dp",))
        dp_mesh = mesh["dp"] if tp > 1 else mesh
        checks.append(_check("mesh builds", True, f"{W} ranks as dp {dp} x tp {tp}" if tp > 1 else f"{W} ranks (dp)"))

        plans: list[tuple[str, list[tuple[str, Any]]]] = []
        mp = [(s, mesh["tp"] if s == "tp" else dp_mesh) for s in ("tp", "ep") if declared[s]]
        if mp:
            plans.append(("+".join(s for s, _ in mp) + ("+dp" if declared["dp"] else ""),
                          mp + ([("dp", dp_mesh)] if declared["dp"] else [])))
        elif declared["dp"] or entry.parallelize is None:
            plans.append(("dp (DDP)", [("dp", dp_mesh)]))
        generic_ok = entry.parallelize is None or declared["dp"] or declared["fsdp"]
        if "fsdp2" in job.dp_variants and (declared["fsdp"] or generic_ok) and not mp:
            plans.append(("fsdp2", [("fsdp", dp_mesh)]))

        summaries = []
        for label, steps in plans:
            model = execute.build_model(entry, weights, "cpu", "fp32", "amp")
            pmodel = model
            ep = dp if declared["ep"] else 1
            try:
                for stage, sub in steps:
                    from .parallel import apply_variant

                    variant = {"dp": "ddp", "fsdp": "fsdp2", "tp": "tp", "ep": "ep"}[stage]
                    pmodel, _how = apply_variant(entry, pmodel, sub, variant, True)
            except Exception as exc:  # noqa: BLE001
                if failure_phase(exc, job.tree) == "harness":
                    raise
                checks.append(_check(f"{label}: plan builds", False, describe(exc, job.tree)["summary"]))
                continue
            from .parallel import _inner

            inner = _inner(pmodel)
            lists = _module_lists(inner)
            ep_lists = {p: (full_lists[p], n) for p, n in lists.items() if p in full_lists and n < full_lists[p]}
            checks.append(_check(f"{label}: plan builds", True, f"on {W} ranks"))
            checks += [dict(c, check=f"{label}: {c['check']}") for c in
                       _divisibility(full, tp if declared["tp"] else 1, ep, ep_lists, full_lists, declared["ep"])]
            checks += [dict(c, check=f"{label}: {c['check']}") for c in
                       _shape_checks(full, inner, tp if declared["tp"] else 1, ep, ep_lists)]
            batch = entry.make_batch(step, dp_mesh.get_local_rank(), dp) if entry.batch_takes_rank else entry.batch(step)
            try:
                info, issued = _run_plan_step(entry, pmodel, inner, batch, shim)
            except Exception as exc:  # noqa: BLE001
                if failure_phase(exc, job.tree) == "harness":
                    raise
                checks.append(_check(f"{label}: forward/backward on the fake group", False,
                                     describe(exc, job.tree)["summary"]))
                continue
            total = sum(issued.values())
            expect = any(s in ("tp", "ep", "dp", "fsdp") for s, _ in steps)
            text = ", ".join(f"{k} {v}" for k, v in sorted(issued.items())) or "none"
            if info["note"]:
                status["notes"].append(f"{label}: {info['note']}")
            checks.append(_check(f"{label}: every collective issued", total > 0 or not expect,
                                 f"{total} collective call(s): {text}" if total else "no collective was issued",
                                 status_if_bad="fail"))
            summaries.append(f"{label}: {total} collectives")
        status["summary"] = (f"world {W} (rank {rank} of dp {dp} x tp {tp}); " if tp > 1 else f"world {W} (rank {rank}); ") \
            + ("; ".join(summaries) if summaries else "no plan ran")
        status["bench"] = {"seconds_in_child": round(time.perf_counter() - t0, 2)}
        status["ok"] = True
    except Exception as exc:  # noqa: BLE001
        if failure_phase(exc, job.tree) == "harness":  # our code raised: exit 2, never the program's fault
            status.update(phase="harness", error=describe(exc, job.tree, during="plan check"))
        else:
            checks.append(_check("plan check", False, describe(exc, job.tree)["summary"]))
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
