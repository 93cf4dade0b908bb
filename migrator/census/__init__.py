"""Runtime op census (`migrate ops --trace`): every op a training step really runs, with its dtypes.

Parent side (no torch here): :func:`trace` starts ``python -m migrator.census.child`` (torch only
there, like `migrate validate`), which runs the ORIGINAL program on the CPU under the CUDA
reference layers for N training steps and records each op at the torch-API level
(``TorchFunctionMode``) and the ATen level (``TorchDispatchMode``) with input dtypes, phase,
count and the user / library frame. :mod:`.verdicts` gives each distinct (op, dtypes) the
coverage verdict for the SoC; :mod:`.store` writes `.migrate/op-trace.json`
(`migrator/ground/schema/op-trace.schema.json`), which `scan` and `report` then use.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .model import Census, TracedOp
from .records import CensusJob, CensusStatus

if TYPE_CHECKING:
    from migrator.validation.parent.launcher import ChildResult

__all__ = ["Census", "CensusError", "TraceOptions", "TracedOp", "trace"]


class CensusError(Exception):
    """The program could not be traced (no protocol, the script failed, timeout): exit 2."""


@dataclass(frozen=True)
class TraceOptions:
    target: str  # a program tree (validate.py protocol) or a script file
    root: str  # the scan root: frames are relative to it, the census is written in it
    script_args: tuple[str, ...] = ()
    steps: int = 1
    soc: str = "A2"
    torch_npu_version: str | None = None
    fake: bool = False
    entry: str | None = None
    bf16_policy: str = "amp"
    seed: int = 0
    threads: int = 1
    timeout: float = 600.0
    single_rank: bool = True  # script mode: run as rank 0 of 1 (torchrun env), so distributed code paths run
    extra_env: dict[str, str] = field(default_factory=dict)
    cann_version: str | None = None  # the advisor's AICPU rules to judge with (default: the newest in the data)
    step_shapes: bool = True  # record shapes per step for the perf lint (off only to measure what it costs)


def _single_rank_env() -> dict[str, str]:
    """What `torchrun --nproc-per-node 1` sets (nccl becomes gloo under the device remap)."""
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return {"RANK": "0", "WORLD_SIZE": "1", "LOCAL_RANK": "0", "LOCAL_WORLD_SIZE": "1", "GROUP_RANK": "0",
            "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port)}


def _job(opts: TraceOptions, out: str) -> CensusJob:
    target = os.path.abspath(opts.target)
    common: dict[str, Any] = {"steps": opts.steps, "fake": opts.fake, "entry": opts.entry, "bf16_policy": opts.bf16_policy,
                              "seed": opts.seed, "threads": opts.threads, "out": out, "root": os.path.abspath(opts.root),
                              "step_shapes": opts.step_shapes}
    if os.path.isfile(target):
        if opts.fake:
            raise CensusError(f"{opts.target}: --fake needs a program with the validate.py protocol, not a script")
        return CensusJob(tree=os.path.dirname(target), script=os.path.basename(target), args=tuple(opts.script_args),
                         **common)
    if os.path.isdir(target):
        if opts.script_args:
            raise CensusError(f"unexpected arguments {' '.join(opts.script_args)!r}: script arguments need a script")
        return CensusJob(tree=target, **common)
    raise CensusError(f"{opts.target}: no such file or directory")


def _failure(result: ChildResult[CensusStatus]) -> str:
    if not result.statuses:
        return f"the census child left no status; log: {result.log_tail[-800:]}"
    error = result.status.error
    return (error.summary if error else "") or "the traced program failed"


def trace(opts: TraceOptions, keep_dir: str | None = None) -> Census:
    """Run the census child for `opts` and judge what it saw. Raises :class:`CensusError`."""
    from migrator.catalogue.coverage import default_version
    from migrator.validation.parent import launcher

    from .aicpu_rules import AdvisorRulesError
    from .fusion_agreement import fusion_sites
    from .perf_lint import lint
    from .verdicts import judge

    work = keep_dir or tempfile.mkdtemp(prefix="migrate-census-")
    try:
        job = _job(opts, os.path.join(work, "census"))
        script = job.script is not None
        extra = {**(_single_rank_env() if script and opts.single_rank else {}), **opts.extra_env}
        env = launcher.child_env(opts.seed, opts.threads, extra or None)
        child = launcher.start(job, "census", env, opts.timeout, module="migrator.census.child")
        result = launcher.wait(child, CensusStatus)
        status = result.status
        if result.timed_out:
            raise CensusError(f"the traced program ran past {opts.timeout:.0f} s")
        if not status.ok:
            raise CensusError(f"{opts.target}: {_failure(result)}")
        version = opts.torch_npu_version or default_version()
        ops = judge(status.rows, opts.soc, version)
        try:
            perf = lint(status.rows, status.steps if status.steps is not None else opts.steps, opts.cann_version)
        except AdvisorRulesError as exc:
            raise CensusError(str(exc)) from None
        program = {"target": _rel(job.tree, opts.root), "mode": "script" if script else "protocol",
                   "script": job.script, "args": list(job.args), "steps": opts.steps, "fake": opts.fake,
                   "bf16_policy": None if script else opts.bf16_policy,
                   "stopped": status.stopped, "optimizer": status.optimizer,
                   "single_rank": script and opts.single_rank,
                   "layers": dict(status.layers)}
        notes = ["CPU run: autocast follows PyTorch's CPU autocast lists, which differ from the CUDA/NPU ones "
                 "for a few ops (e.g. softmax, layer_norm inputs)"]
        if status.layers.get("cuda_reference"):
            notes.append("CUDA libraries (flash_attn, apex, xformers) run as CPU references "
                         "(migrator.validation.child.cuda_reference): their ops are the reference's, not the CUDA kernels'")
        ran = {str(row["user_frame"]["path"]) for row in status.rows if row.get("user_frame")}
        fusions = fusion_sites(status.flow, ran, Path(opts.root))
        return Census(program, opts.soc, version, status.torch, status.seconds, ops, (*notes, *perf.notes), fusions,
                      perf.sites)
    finally:
        if keep_dir is None:
            shutil.rmtree(work, ignore_errors=True)


def _rel(path: str, root: str) -> str:
    try:
        return Path(path).resolve().relative_to(Path(root).resolve()).as_posix() or "."
    except ValueError:
        return path
