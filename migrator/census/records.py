"""The census child's job and status: records of the same contract as ``migrate validate``'s children
(:mod:`migrator.validation.records`: frozen, strict JSON both ways)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from migrator.validation.records import Job, Status


@dataclass(frozen=True, kw_only=True)
class CensusJob(Job):
    KIND: ClassVar[str] = "census"
    steps: int = 1
    fake: bool = False
    bf16_policy: str = "amp"
    root: str | None = None  # the scan root: frames are recorded relative to it
    script: str | None = None  # a script file in `tree` (else the validate.py protocol)
    args: tuple[str, ...] = ()
    step_shapes: bool = True  # shapes and output dtypes per step for the perf lint (off: bench/perf_lint_overhead.py)


@dataclass(frozen=True, kw_only=True)
class CensusStatus(Status):
    torch: str = ""
    seconds: float = 0.0
    rows: tuple[Mapping[str, Any], ...] = ()
    stopped: str | None = None
    optimizer: str | None = None
    steps: int | None = None
    flow: tuple[Mapping[str, Any], ...] = ()  # the first forward's data flow (`flow.Flow`): op, inputs, frame
