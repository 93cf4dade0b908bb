"""The doctor's records: frozen, plain data for the reporters."""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path


class Status(str, Enum):
    """A check's verdict; the value is what `doctor --json` writes."""

    OK = "ok"
    INFO = "info"
    WARN = "warn"
    PROBLEM = "problem"

    @property
    def needs_fix(self) -> bool:
        """A problem or a warning: its `fix` is printed as a fix, not a hint."""
        return self in (Status.PROBLEM, Status.WARN)



@dataclass(frozen=True)
class Host:
    """Where the doctor looks: `root` prefixes every absolute install path (`/usr/local/Ascend`, `/dev`),
    `env` is the environment to judge (and the one `npu-smi` runs in), `package_paths` the folders whose
    package metadata counts (default: this interpreter's `sys.path`)."""

    root: Path = Path("/")
    env: Mapping[str, str] = field(default_factory=lambda: dict(os.environ))
    package_paths: tuple[str, ...] | None = None
    python_version: str = field(default_factory=lambda: ".".join(map(str, sys.version_info[:3])))

    def path(self, absolute: str) -> Path:
        return self.root / absolute.lstrip("/")


@dataclass(frozen=True)
class Check:
    """One line of the report: `status` is ok / info / warn / problem; a problem or warning names its `fix`."""

    name: str
    status: Status
    found: str
    detail: str = ""
    fix: str = ""
    source: str = ""  # the file or command the value was read from


@dataclass(frozen=True)
class Device:
    npu_id: int
    name: str
    health: str


@dataclass(frozen=True)
class DoctorReport:
    checks: tuple[Check, ...]
    npu_present: bool
    devices: tuple[Device, ...] = ()
    log_findings: tuple[LogFinding, ...] = ()

    @property
    def problems(self) -> tuple[Check, ...]:
        return tuple(c for c in self.checks if c.status is Status.PROBLEM)

    @property
    def exit_code(self) -> int:
        """0 when nothing is wrong (warnings allowed), 1 when a check or the log found a problem."""
        return 1 if self.problems or self.log_findings else 0


@dataclass(frozen=True)
class Explanation:
    """A documented error code or message: what it means, what to do, where that is written."""

    code: str
    title: str
    cause: str
    remedy: str
    source: str
    component: str  # CANN runtime, HCCL, torch_npu, driver, ...


@dataclass(frozen=True)
class LogFinding:
    line_number: int
    line: str
    explanation: Explanation
