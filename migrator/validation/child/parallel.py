"""One rank of S2 (data parallel) / S3 (tensor / expert parallel), launched by torchrun (child side).

Per step, every rank:

1. builds the full model from the seed, rounds the weights to bf16 once and checks that every
   rank got the same weights (sha256 all-gathered);
2. runs the *reference*: the unsharded model on this rank's micro-batch (DDP, FSDP2, EP) or on
   the shared batch (TP), fp32 (G) and bf16 (R); reference grads of micro-batches are
   all-gathered and summed in rank order with 1/N — the 1-rank run at the global batch for mean
   losses, and exactly the parallel objective when the loss has per-rank terms (MoE aux loss);
3. runs each variant, fp32 (T32) and bf16 (T16): ``parallelize(model, mesh, stage)`` from the
   protocol (``dp``, ``fsdp``, ``tp``, ``ep``); only a program with no ``parallelize`` at all gets the
   harness's own ``DistributedDataParallel`` / ``fully_shard`` (FSDP2): a variant the program's
   ``parallelize`` does not declare is skipped, never built for it; then ``sync_grads`` if the
   protocol has it, for the program's own plans (and the harness DDP of a program without one) only;
4. un-shards the grads before comparing: DTensor ``full_tensor()``; Megatron-style
   ``p.tp_shard = (dim, parts)`` (all-gather, re-interleave fused parts); expert-parallel
   ``ModuleList`` slices (a list shorter by N after ``parallelize``: local index i on rank r is
   global ``r * len + i``) all-gathered. Activations of expert-local modules are not compared
   (their tokens differ by design); routing indices and per-expert counts are, exactly.

Rank 0's status lists every rank's dumps; the parent compares (:mod:`.stages`).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..records import DATA_PARALLEL, STAGE_OF, ParallelJob
from .errors import ProgramFault

if TYPE_CHECKING:
    import torch
    from torch.distributed import ProcessGroup
    from torch.distributed.device_mesh import DeviceMesh

    from .execute import Timer
    from .protocol import Entry
    from .recorder import Recorder


class Unsupported(Exception):
    """The program declares no plan for this variant."""


def _declares(entry: Entry, stage: str, model: torch.nn.Module, mesh: DeviceMesh) -> tuple[bool, Any]:
    """(declared, parallelized model): call the protocol's ``parallelize``; a ``ValueError`` means
    the program does not implement ``stage``."""
    if entry.parallelize is None:
        return False, None
    try:
        return True, entry.parallelize(model, mesh, stage)
    except ValueError as exc:
        text = str(exc)
        if stage in text or "support" in text.lower():
            return False, text
        raise


def _generic_ddp(model: torch.nn.Module, mesh: DeviceMesh) -> torch.nn.Module:
    from torch.nn.parallel import DistributedDataParallel as DDP

    return DDP(model, process_group=mesh.get_group(), find_unused_parameters=True)


def _generic_fsdp2(model: torch.nn.Module, mesh: DeviceMesh) -> torch.nn.Module:
    import torch
    from torch.distributed.fsdp import fully_shard

    for module in list(model.modules()):
        if isinstance(module, torch.nn.ModuleList):
            for child in module:
                fully_shard(child, mesh=mesh)
    fully_shard(model, mesh=mesh)
    return model


def apply_variant(entry: Entry, model: torch.nn.Module, mesh: DeviceMesh, variant: str,
                  generic_ok: bool) -> tuple[torch.nn.Module, str]:
    """Parallelize ``model`` for ``variant``; returns (wrapped model, how it was done). ``generic_ok``:
    the program has no ``parallelize``, so the harness may wrap it itself."""
    stage = STAGE_OF[variant]
    declared, result = _declares(entry, stage, model, mesh)
    if declared:
        return (result if result is not None else model), f"parallelize(model, mesh, {stage!r})"
    if variant in ("tp", "ep") or not generic_ok:
        raise Unsupported(f"the program declares no {stage!r} plan" + (f" ({result})" if isinstance(result, str) else "")
                          + ("" if variant in ("tp", "ep") else "; the harness does not build one for it"))
    if variant == "ddp":
        return _generic_ddp(model, mesh), "harness DistributedDataParallel (no 'dp' plan declared)"
    return _generic_fsdp2(model, mesh), "harness fully_shard / FSDP2 (no 'fsdp' plan declared)"


def _inner(pmodel: torch.nn.Module) -> torch.nn.Module:
    from torch.nn.parallel import DistributedDataParallel as DDP

    return pmodel.module if isinstance(pmodel, DDP) else pmodel


def _module_lists(model: torch.nn.Module) -> dict[str, int]:
    import torch

    return {name: len(m) for name, m in model.named_modules() if isinstance(m, torch.nn.ModuleList)}


def _gather(t: torch.Tensor, world: int, group: ProcessGroup | None = None) -> list[torch.Tensor]:
    import torch
    import torch.distributed as dist

    t = t.detach().contiguous()
    out = [torch.empty_like(t) for _ in range(world)]
    dist.all_gather(out, t, group=group)
    return out


def unshard_grads(inner: torch.nn.Module, full_names: list[str], ep_lists: dict[str, tuple[int, int]], world: int,
                  rank: int) -> list[tuple[str, Any]]:
    """Full (un-sharded, reduced) grads in the full model's parameter order. Collective."""
    import torch

    try:
        from torch.distributed.tensor import DTensor
    except ImportError:  # pragma: no cover
        DTensor = None  # type: ignore[misc, assignment]
    grads: dict[str, Any] = {}
    for name, p in inner.named_parameters():
        g = p.grad
        if DTensor is not None and isinstance(g, DTensor):
            grads[name] = g.full_tensor()
            continue
        ep_prefix = next((pre for pre in ep_lists if name.startswith(pre + ".")), None)
        if ep_prefix is not None:
            full_len, local_len = ep_lists[ep_prefix]
            rest = name[len(ep_prefix) + 1:]
            idx, _, tail = rest.partition(".")
            local = g if g is not None else torch.zeros_like(p)
            pieces = _gather(local.float() if local.dtype != p.dtype else local, world)
            for r, piece in enumerate(pieces):
                grads[f"{ep_prefix}.{r * local_len + int(idx)}.{tail}"] = piece
            continue
        if hasattr(p, "tp_shard"):
            dim, parts = p.tp_shard
            local = g if g is not None else torch.zeros_like(p)
            pieces = _gather(local, world)
            grads[name] = torch.cat([torch.cat([x.chunk(parts, dim)[i] for x in pieces], dim) for i in range(parts)], dim)
            continue
        grads[name] = g
    ordered = [(n, grads.pop(n, None)) for n in full_names]
    return ordered + sorted(grads.items())


def _accumulate(model: torch.nn.Module, world: int) -> list[tuple[str, torch.Tensor | None]]:
    """Each parameter's grad summed over ranks in rank order (all-gather, then a local fixed-order
    sum in fp64) and divided by N. A rank without a grad contributes zeros."""
    import torch

    out: list[tuple[str, torch.Tensor | None]] = []
    for name, p in model.named_parameters():
        g = p.grad
        flags = _gather(torch.tensor([0.0 if g is None else 1.0]), world)
        if all(float(f) == 0.0 for f in flags):
            out.append((name, None))
            continue
        local = g.detach().float() if g is not None else torch.zeros(p.shape)
        pieces = _gather(local, world)
        total = pieces[0].double()
        for piece in pieces[1:]:
            total = total + piece.double()
        out.append((name, (total / world).float()))
    return out


def _grad_digest(grads: list[tuple[str, Any]]) -> str:
    import hashlib

    h = hashlib.sha256()
    for name, g in grads:
        h.update(name.encode())
        if g is not None:
            h.update(g.detach().float().cpu().contiguous().numpy().tobytes())
    return h.hexdigest()


def run_rank(job: ParallelJob) -> dict[str, Any]:
    from . import execute, protocol

    rank = int(os.environ.get("RANK", "0"))
    world = int(os.environ.get("WORLD_SIZE", "1"))
    status: dict[str, Any] = {"ok": False, "rank": rank, "world_size": world, "variants": {}, "skipped": {},
                              "notes": []}
    started = protocol.prepare("migrated", job.tree, job.entry, status, seed=job.seed, threads=job.threads)
    if started is None:
        return status
    entry, layers = started
    _RankRun(job, entry, layers.device, layers.backend, rank, world, status, execute.Timer()).run()
    return status


@dataclass
class _RankRun:
    """One rank's S2/S3 run, step by step; ``phase`` and ``recorder`` name where a failure happened."""

    job: ParallelJob
    entry: Entry
    device: str
    backend: str
    rank: int
    world: int
    status: dict[str, Any]
    timer: Timer
    phase: str = "init"
    recorder: Recorder | None = None
    weights: dict[str, torch.Tensor] = field(default_factory=dict)  # the unsharded model's, every rank alike
    full_names: list[str] = field(default_factory=list)
    full_lists: dict[str, int] = field(default_factory=dict)
    neutral: bool = False  # dropout still on after make_model(dropout=0.0): off in every run (issue 24)

    def run(self) -> None:
        from .errors import describe, failure_phase

        try:
            mesh = self._init_group()
            self.phase = "weights"
            self._weights()
            self.phase = "dropout census"
            self._dropout()
            for step in self.job.steps:
                refs: dict[str, dict[str, str]] = {}
                for variant in self.job.variants:
                    self._variant_step(mesh, variant, step, refs)
            self.status["timings"] = {"total": self.timer()}
            self.status["ok"] = True
        except Exception as exc:  # noqa: BLE001 - the program failed on this rank
            active = self.recorder.active_modules() if self.recorder is not None else []
            self.status.update(phase=failure_phase(exc, self.job.tree),
                               error=describe(exc, self.job.tree, during=self.phase, active_modules=active))
        finally:
            leave_process_group()

    def _init_group(self) -> DeviceMesh:
        import torch
        import torch.distributed as dist
        from torch.distributed.device_mesh import init_device_mesh

        if self.device != "cpu":  # one accelerator per rank (HCCL/NCCL need it before the group is built)
            getattr(torch, self.device).set_device(int(os.environ.get("LOCAL_RANK", "0")))
        dist.init_process_group(backend=self.backend)
        self.status["backend"] = dist.get_backend()
        return init_device_mesh(self.device, (self.world,), mesh_dim_names=("dp" if self.job.stage == "S2" else "mp",))

    def _weights(self) -> None:
        import torch.distributed as dist

        from .. import determinism
        from . import execute

        determinism.seed_all(self.job.seed)
        full = self.entry.make_model(dropout=0.0)
        self.weights = execute.round_weights(full)
        digest = execute.tensor_hash(self.weights)
        digests = [None] * self.world
        dist.all_gather_object(digests, digest)
        if len(set(digests)) != 1:
            raise ProgramFault("make_model(dropout=0.0) built different weights on different ranks with the same seed")
        self.status["weights_sha256"] = digest
        self.full_names = [n for n, _ in full.named_parameters()]
        self.full_lists = _module_lists(full)

    def _dropout(self) -> None:
        from . import execute

        entry, job = self.entry, self.job
        first = entry.batch(job.steps[0], 0, 1) if entry.batch_takes_rank else entry.batch(job.steps[0])
        self.neutral = bool(execute.dropout_census(entry, self.weights, first, self.device, job.seed)["sites"])
        if self.neutral:
            self.status["notes"].append("dropout active after make_model(dropout=0.0): neutralised in every run of "
                                        "this stage (the unsharded reference and the sharded runs)")

    def _batch(self, kind: str, step: int) -> Any:
        """This rank's batch: its own micro-batch for the data-parallel variants, else the full batch."""
        from . import execute

        entry = self.entry
        if kind == "micro":
            if entry.batch_takes_rank:
                return entry.make_batch(step, self.rank, self.world)
            return execute.split_batch(entry.batch(step), self.world)[self.rank]
        return entry.batch(step, 0, 1) if entry.batch_takes_rank else entry.batch(step)

    def _variant_step(self, mesh: DeviceMesh, variant: str, step: int, refs: dict[str, dict[str, str]]) -> None:
        """Both policies' runs of one variant at one step, then (once per batch kind) the unsharded reference."""
        from . import execute

        job = self.job
        self.phase = f"{variant} step {step}"
        t_variant = execute.Timer()
        kind = "micro" if variant in DATA_PARALLEL else "full"
        mine = self._batch(kind, step)
        try:
            for policy in ("fp32", "bf16"):
                how = self._policy_run(mesh, variant, step, policy, mine)
        except Unsupported as exc:
            self.status["skipped"][variant] = str(exc)
            self.recorder = None
            return
        if kind not in refs:
            self.phase = f"reference ({kind} batch) step {step}"
            refs[kind] = _reference(self.entry, self.weights, self.device, job.bf16_policy, mine, kind, job, self.rank,
                                    self.world, self.full_names, step, job.out, self.neutral)
        self._record_variant(variant, step, kind, how, t_variant())

    def _policy_run(self, mesh: DeviceMesh, variant: str, step: int, policy: str, mine: Any) -> str:
        """One sharded forward/backward under ``policy``, its unsharded grads saved; returns how it was sharded."""
        import torch.distributed as dist

        from .. import determinism
        from . import execute
        from .recorder import Recorder

        job, entry, world, rank = self.job, self.entry, self.world, self.rank
        determinism.seed_all(job.seed)
        model = execute.build_model(entry, self.weights, self.device, policy, job.bf16_policy)
        pmodel, how = apply_variant(entry, model, mesh, variant, entry.parallelize is None)
        inner = _inner(pmodel)
        lists = _module_lists(inner)
        ep_lists = {p: (self.full_lists[p], n) for p, n in lists.items()
                    if p in self.full_lists and n < self.full_lists[p] and self.full_lists[p] == n * world}
        recorder = self.recorder = Recorder(inner, max_bytes=job.max_bytes)
        recorder.skip_prefixes = tuple(ep_lists)
        recorder.attach()
        data = execute.prepare_batch(mine, self.device, policy, job.bf16_policy)
        with execute.dropout_context(inner, self.neutral):
            execute.forward_backward(entry, inner, pmodel, data, policy, job.bf16_policy, self.device, recorder)
        if entry.sync_grads is not None and (how.startswith("parallelize") or variant == "ddp"):
            entry.sync_grads(pmodel, mesh, STAGE_OF[variant])
        grads = unshard_grads(inner, self.full_names, ep_lists, world, rank)
        if variant == "ddp":
            digests = [None] * world
            dist.all_gather_object(digests, _grad_digest(grads))
            self.status.setdefault("replicas", {})[f"{variant}/{policy}"] = len(set(digests)) == 1
        if rank == 0:
            recorder.record_param_grads(grads)
        recorder.detach()
        recorder.save(_run_dir(job.out, variant, step, policy, rank),
                      {"variant": variant, "policy": policy, "step": step, "rank": rank, "how": how,
                       "expert_parallel_lists": ep_lists})
        self.recorder = None
        return how

    def _record_variant(self, variant: str, step: int, kind: str, how: str, seconds: float) -> None:
        """The variant's run folders (every rank's for a micro batch) and, for DDP, the replica check."""
        out, status = self.job.out, self.status
        info = status["variants"].setdefault(variant, {"how": how, "runs": {}, "checks": []})
        ranks = range(self.world) if kind == "micro" else [0]
        info["runs"][f"step{step}"] = {
            str(r): {"fp32": _run_dir(out, variant, step, "fp32", r),
                     "bf16": _run_dir(out, variant, step, "bf16", r),
                     "ref_fp32": _run_dir(out, f"ref_{kind}", step, "fp32", r),
                     "ref_bf16": _run_dir(out, f"ref_{kind}", step, "bf16", r)} for r in ranks}
        if variant == "ddp":
            same = all(status.get("replicas", {}).get(f"ddp/{p}", True) for p in ("fp32", "bf16"))
            info["checks"].append({"check": "reduced grads identical on every rank", "status": "pass" if same else "fail",
                                   "message": "" if same else "ranks hold different grads after DDP's reduction"})
        info["seconds"] = info.get("seconds", 0) + seconds


def _run_dir(out: str, what: str, step: int, policy: str, rank: int) -> str:
    return os.path.join(out, what, f"step{step}", policy, f"rank{rank}")


def _reference(entry: Entry, weights: dict[str, torch.Tensor], device: str, bf16_policy: str, mine: Any, kind: str,
               job: ParallelJob, rank: int, world: int, full_names: list[str], step: int, out: str,
               neutral: bool = False) -> dict[str, str]:
    """The unsharded reference on this rank's batch, fp32 and bf16; grads accumulated over ranks."""
    from .. import determinism
    from . import execute
    from .recorder import Recorder

    dirs = {}
    for policy in ("fp32", "bf16"):
        determinism.seed_all(job.seed)
        model = execute.build_model(entry, weights, device, policy, bf16_policy)
        rec = Recorder(model, max_bytes=job.max_bytes).attach()
        data = execute.prepare_batch(mine, device, policy, bf16_policy)
        with execute.dropout_context(model, neutral):
            execute.forward_backward(entry, model, model, data, policy, bf16_policy, device, rec)
        rec.detach()
        grads = _accumulate(model, world) if kind == "micro" else execute.param_grads(model)
        if rank == 0:
            rec.record_param_grads(grads)
        run_dir = _run_dir(out, f"ref_{kind}", step, policy, rank)
        rec.save(run_dir, {"reference": kind, "policy": policy, "step": step, "rank": rank})
        dirs[policy] = run_dir
    return dirs


def leave_process_group() -> None:
    """Tear the process group down at a rank's end, whatever state a failure left it in."""
    import torch.distributed as dist

    if dist.is_initialized():
        try:
            dist.destroy_process_group()
        except Exception:  # noqa: BLE001 - a broken group is already reported by the run's status
            pass
