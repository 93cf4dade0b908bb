"""Script mode through S2 (parent side): an unmodified script that supports torchrun, original vs
migrated under ``torch.distributed.run`` at N ranks.

Both sides run the script's own distributed path (its ``init_process_group``, ``DDP``, its own
per-rank data shard) with autocast forced off (fp32: the logic check), K optimizer steps
(``--curve-steps``), weights shared at the root's first forward exactly as in S1 script mode (the
original's rank 0 writes them, every migrated rank loads them). Compared, rank by rank: every
recorded tensor of step 0 including the grads the optimizer sees (its step pre-hook: after the
program's reduction and clipping), fp32 rel_l2; rank 0's parameter updates after K steps
(:mod:`.compare_train`); the per-rank loss curves (a smoke check). S0 and S3 need the protocol
(:data:`PROTOCOL_TEMPLATE`).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from ..facts import CheckRow
from ..records import ScriptJob, ScriptStatus, Side, Status, other_tree
from ..verdict import Verdict

if TYPE_CHECKING:
    from .options import Options
    from .results import StageResult
    from .stage_kit import Progress

CURVE_WARN = 2e-3  # per-step relative loss difference: a smoke check, never a gate

PROTOCOL_TEMPLATE = """S0 (plan at the real world size) and S3 (tensor/expert parallel) need a validate.py at the tree root:
    import torch
    from model import Model                       # your model
    def make_model(dropout=0.0): return Model(dropout=dropout)
    def make_batch(step, rank=0, world_size=1):   # deterministic, this rank's shard
        g = torch.Generator().manual_seed(step * world_size + rank)
        return {"x": torch.randint(0, 100, (4, 64), generator=g)}
    def loss_fn(out, batch): return out.float().mean()
    def parallelize(model, mesh, stage):          # "dp", "fsdp", "tp", "ep"; ValueError if not implemented
        ...
    def make_optimizer(model): return torch.optim.AdamW(model.parameters(), lr=3e-4)   # optional
    def make_scaler(): return torch.cuda.amp.GradScaler()                              # optional
    def train_step(model, optimizer, loss, scaler): ...                                # optional
then: migrate validate TREE   (README: `migrate validate`, the protocol)"""


MAX_RETRY_RANKS = 4  # the world sizes tried when the original refuses one: N, N+1, ... up to this (one node)


def world_sizes(opts: Options) -> list[int]:
    """The world sizes S2 tries, in order: the one asked for, then (one node only) the next ones up to
    :data:`MAX_RETRY_RANKS` (a script may accept only some: nanoGPT's accumulation steps must divide)."""
    first = opts.world_size * opts.nnodes
    if opts.nnodes != 1:
        return [first]
    return [first] + list(range(first + 1, max(first, MAX_RETRY_RANKS) + 1))


def run_script_s2(opts: Options, original: str, migrated: str, work: str, progress: Progress = None) -> StageResult:
    """S2 at the first world size the original script accepts; "could not run" (not_run, never a failure)
    when the original fails at every one tried."""
    from .results import StageResult
    from .stage_kit import failure_text

    refused: list[str] = []
    for nprocs in world_sizes(opts):
        result, original_failure = _script_s2_at(opts, original, migrated, work, nprocs, progress)
        if original_failure is None:
            assert result is not None  # _script_s2_at gives the stage exactly when the original ran
            if refused and result.status in (Verdict.PASS, Verdict.WARN):
                result = replace(result, notes=result.notes + (f"the original script fails at {'; '.join(refused)}: "
                                                               f"S2 ran at {nprocs} ranks",))
            return result
        refused.append(f"{nprocs} ranks")
        line = failure_text(original_failure)
    sizes = ", ".join(str(n) for n in world_sizes(opts))
    return StageResult("S2", Verdict.NOT_RUN, summary=f"could not run: original fails at {sizes} ranks: {line}",
                       reason=f"the original script fails under torchrun at every world size tried ({sizes}); "
                              "S2 says nothing about the migration")


def _script_s2_at(opts: Options, original: str, migrated: str, work: str, nprocs: int,
                  progress: Progress = None) -> tuple[StageResult | None, Status | None]:
    """(the stage at ``nprocs`` ranks, None) or (None, the original's failure) when the original fails there."""
    from . import launcher
    from .comparison.compare import Comparison, Run, compare_runs
    from .comparison.compare_train import compare_training
    from .results import StageResult
    from .stage_kit import failure_text, numeric_stage, say

    say(progress, f"S2 (script mode): {opts.script} under torchrun at {nprocs} ranks, original and migrated (fp32)")
    base = os.path.join(work, f"script_s2_{nprocs}")
    shared = os.path.join(base, "shared")
    env = launcher.child_env(opts.seed, opts.threads)
    children = {}
    runs: tuple[tuple[str, Side, bool], ...] = (("G", "original", True), ("T32", "migrated", False))
    per_node = nprocs // opts.nnodes
    assert opts.script is not None  # script mode runs only with --script
    for key, side, writes in runs:
        job = ScriptJob(distributed=True, side=side, policy="fp32", writes_weights=writes,
                        tree=(tree := original if side == "original" else migrated), script=opts.script,
                        other_tree=other_tree(tree, original, migrated), pythonpath=opts.pythonpath,
                        args=tuple(opts.script_args), curve_steps=opts.curve_steps, seed=opts.seed,
                        threads=opts.threads, shared=shared, out=os.path.join(base, key),
                        wait_timeout=opts.timeout, max_bytes=opts.max_bytes)
        children[key] = launcher.start_torchrun(job, f"s2-{key}", env, per_node, nnodes=opts.nnodes,
                                                rdzv_endpoint=opts.rdzv_endpoint, timeout=opts.timeout)
    results = {k: launcher.wait(c, ScriptStatus) for k, c in children.items()}
    bench: dict[str, Any] = {"seconds": round(max(r.seconds for r in results.values()), 2), "ranks": nprocs}
    for key in ("G", "T32"):
        failure = results[key].failure()
        if failure is not None:
            side = "original" if key == "G" else "migrated"
            if key == "G" and failure.phase == "run":  # the original refuses this world size: not the migration
                return None, failure
            status = Verdict.ERROR if failure.phase in ("entry", "harness") else Verdict.FAIL
            return StageResult("S2", status, summary=f"the {side} script failed under torchrun ({key})", bench=bench,
                               reason=f"{side} script ({key}, {nprocs} ranks) {failure_text(failure)}"), None
    st = {k: r.statuses for k, r in results.items()}
    comparison = Comparison()
    worst = 0.0
    for rank in range(nprocs):
        g, t = st["G"][rank], st["T32"][rank]
        golden = Run.load(g.step0)
        if golden is None:
            return StageResult("S2", Verdict.ERROR, summary="could not run", bench=bench,
                               reason=f"the original script recorded no step on rank {rank}"), None
        comparison.extend(compare_runs(golden, None, Run.load(t.step0), None,
                                       label=f"rank{rank}/step0/", gate_unmatched=True))
        diffs = loss_diffs(t.losses, g.losses)
        worst = max([worst, *diffs])
    if st["G"][0].train and st["T32"][0].train:
        comparison.extend(compare_training(Run.load(st["G"][0].train), None, Run.load(st["T32"][0].train), None))
    curve: CheckRow = {"check": f"loss curves, {opts.curve_steps} steps on every rank (smoke check, not a gate)",
             "status": Verdict.WARN if worst > CURVE_WARN else Verdict.PASS, "worst": worst, "threshold": CURVE_WARN,
             "message": f"max per-step relative loss difference T32 vs G over {nprocs} ranks {worst:.3g}"}
    notes = [f"script mode S2: {opts.script} {' '.join(opts.script_args)} under torch.distributed.run, "
             f"{nprocs} ranks, the script's own distributed code on both sides; autocast forced off (fp32 logic)",
             "per-rank grads recorded at the optimizer's step pre-hook (after the program's reduction)"]
    return numeric_stage("S2", comparison, bench=bench, notes=notes, extra_checks=(curve,),
                         extra_summary=f"script x{nprocs} (torchrun)"), None


def loss_diffs(migrated: Sequence[float], original: Sequence[float]) -> list[float]:
    """Per-step relative loss differences over the steps both sides ran."""
    n = min(len(migrated), len(original))
    return [abs(a - b) / max(abs(b), 1e-30) for a, b in zip(migrated[:n], original[:n])]
