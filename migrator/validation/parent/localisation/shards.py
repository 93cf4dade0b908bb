"""Rank-local activations under S3 localised (parent side; torch only inside the functions).

A tensor-parallel rank holds module inputs and outputs of 1/tp of the original's features: a
column-parallel output, a row-parallel input. They are not graded (they differ from the unsharded
run by design), but each is compared here with the original's tensor cut the ways a Megatron-style
split cuts it: the rank's block of the whole dimension (``parts`` 1), or its block of each of
``parts`` equal parts, concatenated (a fused q/k/v or gate/up weight split per part). The first
rank-local tensor that is no such shard of the original's is where the ranks stop computing the
original's maths; when it is a module's input and the rank-local output just before it (its
producer, the module's sibling) is a shard of another layout than the code between them reads, the
producer's split is named: ``gate_up_proj`` split whole while the MLP combines its 2 halves.
Only called on a failing stage, to say where and why; never decides a verdict."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..comparison.compare import Run

AGREES = 1e-4  # fp32 rel_l2 between a rank's tensor and the original's shard that agree
PARTS = (1, 2, 3, 4)  # fused weights: q/k/v (3), gate/up (2), ...
FORWARD = ("forward_input", "forward_output")


@dataclass(frozen=True)
class RankLocal:
    """One rank-local forward tensor: where it is cut and the layout of the original's it holds."""

    match: str
    module: str
    cls: str
    kind: str  # forward_input / forward_output
    dim: int
    full: int  # the original's size along ``dim``
    parts: int | None  # the shard layout it holds; None: no shard of the original's

    @property
    def where(self) -> str:
        io = "input" if self.kind == "forward_input" else "output"
        return f"{self.module} ({self.cls}) {io}"


def shard(full: Any, dim: int, parts: int, tp: int, rank: int) -> Any:
    """Rank ``rank``'s block of each of ``parts`` equal parts of ``full`` along ``dim``, concatenated."""
    import torch

    return torch.cat([part.chunk(tp, dim)[rank] for part in full.chunk(parts, dim)], dim)


def layout(local: Any, full: Any, dim: int, tp: int, rank: int) -> int | None:
    """The number of parts whose per-part split of ``full`` gives ``local``; None when none does."""
    from ... import metrics as M

    for parts in PARTS:
        if full.shape[dim] % (parts * tp):
            continue
        expected = shard(full.float(), dim, parts, tp, rank)
        if tuple(expected.shape) == tuple(local.shape) and M.rel_l2(local.float(), expected) <= AGREES:
            return parts
    return None


def _cut(local_shape: Sequence[int], full_shape: Sequence[int], tp: int) -> int | None:
    """The one dim along which a rank holds 1/tp of the original's, else None."""
    if len(local_shape) != len(full_shape):
        return None
    dims = [d for d, (a, b) in enumerate(zip(local_shape, full_shape)) if a != b]
    return dims[0] if len(dims) == 1 and local_shape[dims[0]] * tp == full_shape[dims[0]] else None


def rank_local(golden: Run, run: Run, tp: int, rank: int, before: str | None = None) -> list[RankLocal]:
    """The run's forward tensors of 1/tp of the original's size along one dim, in recording order (those
    recorded before the tensor ``before`` matches, when given)."""
    out = []
    for event in run.events:
        if event.match == before:
            break
        g_event = golden.by_match.get(event.match)
        if event.kind not in FORWARD or g_event is None or event.shape is None or g_event.shape is None:
            continue
        dim = _cut(event.shape, g_event.shape, tp)
        local, full = run.tensor(event.match), golden.tensor(event.match)
        if dim is None or local is None or full is None or not full.is_floating_point():
            continue
        out.append(RankLocal(event.match, event.module, event.cls, event.kind, dim, g_event.shape[dim],
                             layout(local, full, dim, tp, rank)))
    return out


def _parent(module: str) -> str:
    return module.rpartition(".")[0]


def cause(golden: Run, run: Run, tp: int, rank: int, before: str | None = None) -> str | None:
    """The first rank-local tensor that is no shard of the original's, and the split that made it; with
    ``before`` (the first failing tensor's match key) only one recorded before it: a rank-local tensor
    after a failure upstream differs because its inputs do."""
    found = rank_local(golden, run, tp, rank, before)
    bad = next((i for i, t in enumerate(found) if t.parts is None), None)
    if bad is None:
        return None
    first = found[bad]
    text = (f"rank-local tensors (tp={tp}, rank {rank}): the {first.where} is no shard of the original's "
            f"(along dim {first.dim}, neither whole nor per part)")
    producer = found[bad - 1] if bad else None
    if (first.kind != "forward_input" or producer is None or producer.kind != "forward_output"
            or producer.parts is None or _parent(producer.module) != _parent(first.module)
            or producer.full % first.full or producer.full == first.full):
        return text
    combined = producer.full // first.full
    if combined == producer.parts:
        return text
    held = "whole" if producer.parts == 1 else f"as {producer.parts} parts"
    return (f"{text}; {producer.module} ({producer.cls}) before it splits its {producer.full} output features "
            f"{held}, but {_parent(producer.module) or 'the model'} combines {combined} parts of them "
            f"({producer.full} -> {first.full} features): a fused weight (gate/up, q/k/v) must be column-split per "
            f"part (1/{tp} of each of the {combined} parts, tp_shard = (0, {combined}))")
