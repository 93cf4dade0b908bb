"""``migrate validate --nnodes N``: node 0 runs the stages with the other nodes joined (:mod:`.multinode`);
every other node follows: it starts node 0's torchrun launches on its own trees, sends each launch's
records to node 0 and ends with node 0's verdict (or "lost node 0"). Parent side."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ... import records
from ...verdict import Verdict
from .. import launcher
from ..options import Options
from ..results import StageResult, ValidationResult
from ..stage_kit import MigrateStep, Progress, migrate_tree, say
from . import lead as multinode
from .lead import Link, NodeLost
from .node_spec import NodeSpec

RunHere = Callable[[Options, Progress, "MigrateStep | None"], ValidationResult]


def run_across_nodes(opts: Options, progress: Progress, migrate: MigrateStep | None,
                     run_here: RunHere) -> ValidationResult:
    """Node 0: ``run_here`` (the one-node stages) with the other nodes joined; node K: follow node 0."""
    spec = NodeSpec(opts.nnodes, opts.node_rank, opts.rdzv_endpoint)
    original = os.path.abspath(opts.original)
    if opts.record or opts.compare:
        from ..stage_kit import ValidationSetupError

        raise ValidationSetupError("--nnodes > 1 runs S2/S3 across nodes: not with --record/--compare (run "
                                   "those on one node)")
    if spec.node_rank != 0:
        return _follow(spec, opts, original, progress, migrate)
    say(progress, f"node 0 of {spec.nnodes}: rendezvous store on {spec.endpoint}, waiting for the other nodes")
    try:
        leader = multinode.open_leader(spec, original, opts.timeout)
        leader.wait_joined()
    except NodeLost as exc:
        multinode.close_leader()
        return _lost_result(opts, original, str(exc))
    try:
        result = run_here(opts, progress, migrate)
        leader.finish([_stage_doc(s) for s in result.stages], result.exit_code)
        return result
    finally:
        multinode.close_leader()


def _stage_doc(stage: StageResult) -> dict[str, Any]:
    return {"id": stage.id, "status": stage.status, "summary": stage.summary, "reason": stage.reason,
            "first_divergence": stage.first_divergence}


def _lost_result(opts: Options, original: str, why: str) -> ValidationResult:
    stages = tuple(StageResult(sid, Verdict.ERROR, summary="lost node", reason=why) if sid in opts.stages and
                   sid in ("S2", "S3") else StageResult(sid, Verdict.NOT_RUN, reason="not run on this node")
                   for sid in ("S0", "S1", "S2", "S3"))
    return ValidationResult(original=original, migrated=opts.migrated, stages=stages, notes=(why,))


@dataclass
class _Roots:
    """Node K's own folders for the paths in node 0's jobs."""

    original: str
    migrated: str
    work: str

    def job(self, job: dict[str, Any], leader_original: str, seq: int) -> dict[str, Any]:
        out = dict(job)
        out["tree"] = self.original if job.get("tree") == leader_original else self.migrated
        out["out"] = os.path.join(self.work, f"launch{seq}")
        if job.get("shared"):  # a folder several launches share (script mode): one per folder of node 0
            digest = hashlib.sha256(str(job["shared"]).encode()).hexdigest()[:12]
            out["shared"] = os.path.join(self.work, "shared", digest)
        return out


def _follow(spec: NodeSpec, opts: Options, original: str, progress: Progress,
            migrate: MigrateStep | None) -> ValidationResult:
    work = os.path.abspath(opts.work_dir) if opts.work_dir else tempfile.mkdtemp(prefix="migrate-validate-")
    os.makedirs(work, exist_ok=True)
    try:
        migrated = os.path.abspath(opts.migrated) if opts.migrated else migrate_tree(original, work, progress, migrate)
        say(progress, f"node {spec.node_rank} of {spec.nnodes}: joining node 0 at {spec.endpoint}")
        try:
            link = Link(spec, opts.timeout)
        except NodeLost as exc:
            return _lost_result(opts, original, str(exc))
        try:  # node 0's launches fork from this node's zygote, as node 0's own do (it imports torch meanwhile)
            with launcher.warm_starts(launcher.child_env(opts.seed, opts.threads)):
                return _follow_launches(link, opts, _Roots(original, migrated, work), progress)
        finally:
            link.close()
    finally:
        if not (opts.keep_work_dir or opts.work_dir):
            shutil.rmtree(work, ignore_errors=True)


def _follow_launches(link: Link, opts: Options, roots: _Roots, progress: Progress) -> ValidationResult:
    me = opts.node_rank
    running: dict[int, launcher.Child] = {}
    try:
        link.set(f"hello/{me}", b"1")
        seq = 0
        while not link.has("done"):
            if link.has(f"launch/{seq}"):
                running[seq] = _start(json.loads(link.get(f"launch/{seq}")), seq, opts, roots, progress)
                seq += 1
                continue
            for n, child in list(running.items()):
                if child.done() or time.monotonic() - child.started > child.timeout:
                    launcher.kill(child)
                    link.set(f"shard/{n}/{me}/head", json.dumps({"out": child.out}).encode())
                    link.set(f"shard/{n}/{me}", multinode.pack(child.out))
                    del running[n]
            time.sleep(multinode.POLL_SECONDS)
        verdict = json.loads(link.get("done"))
        link.set(f"bye/{me}", b"1")
    except NodeLost as exc:
        return _lost_result(opts, roots.original, str(exc))
    finally:
        for child in running.values():
            launcher.kill(child)
    stages = tuple(StageResult(d["id"], d["status"], summary=d.get("summary") or "", reason=d.get("reason"),
                               first_divergence=d.get("first_divergence")) for d in verdict["stages"])
    return ValidationResult(original=roots.original, migrated=roots.migrated, stages=stages,
                            notes=(f"node {me} of {opts.nnodes}: node 0's verdict (it gathered every node's "
                                   "records and compared them)",))


def _start(spec: dict[str, Any], seq: int, opts: Options, roots: _Roots, progress: Progress) -> launcher.Child:
    job = records.job_from_json(roots.job(spec["job"], spec["original"], seq), where=f"node 0's launch {seq}")
    say(progress, f"{spec['name']}: {spec['nproc_per_node']} rank(s) here (rendezvous {spec['rdzv_id']})")
    child = launcher.start_torchrun(job, spec["name"], launcher.child_env(opts.seed, opts.threads),
                                    spec["nproc_per_node"], nnodes=opts.nnodes, rdzv_endpoint=opts.rdzv_endpoint,
                                    timeout=float(spec["timeout"]), rdzv_id=spec["rdzv_id"])
    return child
