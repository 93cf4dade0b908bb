"""``--record`` / ``--compare``: the reference side run on one machine, packed with its status, and
unpacked where the migrated side runs (paths pointed at the unpacked copy)."""

from __future__ import annotations

import json
import os
import shutil
import tarfile
from dataclasses import replace
from typing import Any, Literal

from .. import records
from ..records import SideStatus
from .compare import FAIL
from .options import Options
from .results import StageResult, ValidationResult
from .stage_common import Progress, StageContext, ValidationSetupError, _failure_text, _say
from .stage_s1 import _s1_jobs


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


def _unpack(src: str, dest: str) -> str:
    if os.path.isdir(src):
        shutil.copytree(src, dest)
        return dest
    with tarfile.open(src) as tar:
        tar.extractall(os.path.dirname(dest), filter="data")
    extracted = os.path.join(os.path.dirname(dest), "reference")
    if extracted != dest:
        os.replace(extracted, dest)
    return dest


def _read_recorded(archive: str, shared: str) -> SideStatus:
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
    def fix(value):
        if isinstance(value, str) and value.startswith(old_root):
            return new_root + value[len(old_root):]
        if isinstance(value, dict):
            return {k: fix(v) for k, v in value.items()}
        if isinstance(value, list):
            return [fix(v) for v in value]
        return value

    return fix(status)


def _record(opts: Options, original: str, work: str, ctx: StageContext, progress: Progress) -> ValidationResult:
    """``--record``: run the reference side only and save weights, batches, dumps and manifest."""
    from . import launcher

    shared = ctx.shared
    orig_job, _ = _s1_jobs(opts, original, original, work, shared)
    _say(progress, f"recording the reference side (G fp32, R bf16) into {opts.record}")
    res = launcher.wait(launcher.start(orig_job, "original", launcher.child_env(opts.seed, opts.threads), opts.timeout),
                        SideStatus)
    failure = res.failure()
    status = res.status
    layers = {"original": dict(status.layers)}
    if failure is not None:
        verdict = "error" if failure.phase in ("entry", "harness") else FAIL
        stage = StageResult("S1", verdict, summary="reference side failed", reason=f"original {_failure_text(failure)}")
    else:
        records.write(replace(status, shared_root=shared), os.path.join(shared, "status.json"))
        from .reference_meta import write_meta

        ctx.manifest["reference"] = write_meta(shared, original, status.device)
        assert opts.record is not None  # _record runs only with --record
        _pack(shared, opts.record)
        stage = StageResult("S1", "not_run", summary="reference recorded",
                            reason=f"reference side recorded to {opts.record}; run `migrate validate --compare "
                                   f"{opts.record}` where the migrated side runs",
                            bench={"seconds": round(res.seconds, 2)})
    ctx.manifest.update(weights_sha256=status.weights_sha256, batch_sha256=dict(status.batch_sha256),
                           determinism={"original": dict(status.manifest)}, devices={"original": status.device})
    others = [StageResult(s, "not_run", reason="--record runs the reference side only") for s in ("S0", "S2", "S3")]
    stages = (others[0], stage, *others[1:])
    return ValidationResult(original=original, migrated=None, stages=stages, layers=layers, manifest=ctx.manifest,
                            notes=(f"reference recorded to {opts.record}",), mode="record")
