"""``--record`` / ``--compare``: the reference side run on one machine, packed with its status, and
unpacked where the migrated side runs (paths pointed at the unpacked copy).

:func:`run` is the ``--record`` stage (S1's reference side only); :func:`record_result` the whole
result of such a run; :func:`unpack` and :func:`read_recorded` the ``--compare`` side."""

from __future__ import annotations

import json
import os
import shutil
import tarfile
from dataclasses import replace
from typing import Any, Literal

from ... import records
from ...records import SideStatus
from ...verdict import Verdict
from ..results import StageResult, ValidationResult
from ..stage_kit import StageContext, ValidationSetupError, failure_text
from .s1 import side_jobs


def _pack(src: str, dest: str) -> None:
    if dest.endswith((".tar", ".tar.gz", ".tgz")):
        os.makedirs(os.path.dirname(os.path.abspath(dest)) or ".", exist_ok=True)
        mode: Literal["w:gz", "w"] = "w:gz" if dest.endswith(("gz", "tgz")) else "w"
        with tarfile.open(dest, mode) as tar:
            tar.add(src, arcname="reference")
    else:
        if os.path.exists(dest):
            shutil.rmtree(dest)
        shutil.copytree(src, dest)


def unpack(src: str, dest: str) -> str:
    """The recorded reference (folder or tar archive) copied to ``dest``; ``dest``."""
    if os.path.isdir(src):
        shutil.copytree(src, dest)
        return dest
    with tarfile.open(src) as tar:
        tar.extractall(os.path.dirname(dest), filter="data")
    extracted = os.path.join(os.path.dirname(dest), "reference")
    if extracted != dest:
        os.replace(extracted, dest)
    return dest


def read_recorded(archive: str, shared: str) -> SideStatus:
    """The reference side's status saved by ``--record``, its paths pointed at the unpacked copy."""
    path = os.path.join(shared, "status.json")
    if not os.path.isfile(path):
        raise ValidationSetupError(f"{archive}: not a recorded reference (no status.json in it; make one with "
                                   "`migrate validate --record`)")
    try:
        with open(path, encoding="utf-8") as fh:
            data = json.load(fh)
        root = data.get("shared_root", shared) if isinstance(data, dict) else shared
        return records.from_json(_relocate(data, root, shared), SideStatus, "its status.json")
    except (OSError, ValueError) as exc:  # RecordError and JSONDecodeError are ValueErrors
        raise ValidationSetupError(f"{archive}: not a reference recorded by this version of migrate validate "
                                   f"({exc})") from None


def _relocate(status: Any, old_root: str, new_root: str) -> Any:
    """Recorded statuses hold absolute paths of the recording host: point them at the unpacked copy."""
    def fix(value: Any) -> Any:
        if isinstance(value, str) and value.startswith(old_root):
            return new_root + value[len(old_root):]
        if isinstance(value, dict):
            return {k: fix(v) for k, v in value.items()}
        if isinstance(value, list):
            return [fix(v) for v in value]
        return value

    return fix(status)


def run(ctx: StageContext) -> StageResult:
    """``--record``: run the reference side only and save weights, batches, dumps and manifest."""
    from .. import launcher

    opts, shared = ctx.opts, ctx.shared
    orig_job, _ = side_jobs(ctx)
    ctx.say(f"recording the reference side (G fp32, R bf16) into {opts.record}")
    res = launcher.wait(launcher.start(orig_job, "original", launcher.child_env(opts.seed, opts.threads), opts.timeout),
                        SideStatus)
    failure = res.failure()
    status = res.status
    ctx.layers = {"original": dict(status.layers)}
    if failure is not None:
        verdict = Verdict.ERROR if failure.phase in ("entry", "harness") else Verdict.FAIL
        stage = StageResult("S1", verdict, summary="reference side failed", reason=f"original {failure_text(failure)}")
    else:
        records.write(replace(status, shared_root=shared), os.path.join(shared, "status.json"))
        from ..reference_meta import write_meta

        ctx.manifest["reference"] = write_meta(shared, ctx.original, status.device)
        assert opts.record is not None  # this stage runs only with --record
        _pack(shared, opts.record)
        stage = StageResult("S1", Verdict.NOT_RUN, summary="reference recorded",
                            reason=f"reference side recorded to {opts.record}; run `migrate validate --compare "
                                   f"{opts.record}` where the migrated side runs",
                            bench={"seconds": round(res.seconds, 2)})
    ctx.manifest.update(weights_sha256=status.weights_sha256, batch_sha256=dict(status.batch_sha256),
                        determinism={"original": dict(status.manifest)}, devices={"original": status.device})
    return stage


def record_result(ctx: StageContext) -> ValidationResult:
    """The result of a ``--record`` run: the recorded S1, the other stages not run."""
    stage = run(ctx)
    others = [StageResult(s, Verdict.NOT_RUN, reason="--record runs the reference side only") for s in ("S0", "S2", "S3")]
    stages = (others[0], stage, *others[1:])
    return ValidationResult(original=ctx.original, migrated=None, stages=stages, layers=ctx.layers,
                            manifest=ctx.manifest, notes=(f"reference recorded to {ctx.opts.record}",), mode="record")
