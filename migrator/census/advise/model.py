"""Value types of `migrate advise` (frozen; the reporter renders them, the api returns them)."""

from __future__ import annotations

from dataclasses import dataclass, field

CONFIRMED, NOT_SEEN, NOT_CHECKABLE = "confirmed", "not seen", "not checkable"
STATUSES = (CONFIRMED, NOT_SEEN, NOT_CHECKABLE)


@dataclass(frozen=True)
class KernelRow:
    """One row of kernel_details.csv (the columns this tool reads)."""

    name: str
    type: str
    core: str  # Accelerator Core: AI_CORE, AI_CPU, AI_VECTOR_CORE, MIX_AIC, HCCL...
    duration_us: float
    input_dtypes: str = ""
    input_shapes: str = ""
    step: str = ""
    output_dtypes: str = ""


@dataclass(frozen=True)
class ProfileFacts:
    """What the profile shows, read from its ASCEND_PROFILER_OUTPUT folder."""

    output_dir: str
    files: tuple[str, ...]  # the documented files found
    kernels: tuple[KernelRow, ...] = ()
    op_types: tuple[tuple[str, str, int, float], ...] = ()  # op_statistic.csv: (OP Type, Core Type, Count, Total Time(us))
    sync_calls: int = 0  # trace_view.json events naming aclrtSynchronizeStream / SynchronizeStream
    sync_us: float = 0.0
    steps: tuple[tuple[str, float, float], ...] = ()  # step_trace_time.csv: (Step, Computing, Free) in us
    notes: tuple[str, ...] = ()

    @property
    def aicpu_kernels(self) -> tuple[KernelRow, ...]:
        return tuple(k for k in self.kernels if k.core.replace(" ", "_").upper() == "AI_CPU")

    def kernel_types(self) -> set[str]:
        return {k.type.lower() for k in self.kernels} | {t.lower() for t, *_ in self.op_types}


@dataclass(frozen=True)
class Check:
    """One pre-hardware finding checked against the profile."""

    code: str
    path: str
    line: int
    message: str
    status: str  # confirmed, not seen, not checkable
    evidence: str


@dataclass(frozen=True)
class AdvisorRun:
    """`msprof-analyze advisor all -d DIR`: ran (its output), failed, or not installed."""

    command: tuple[str, ...]
    installed: bool
    exit_code: int | None = None
    output: str = ""


@dataclass(frozen=True)
class AdviseResult:
    profile: ProfileFacts
    checks: tuple[Check, ...]
    advisor: AdvisorRun
    census: bool  # the root's op census took part (its findings are among the checked ones)
    notes: tuple[str, ...] = field(default_factory=tuple)

    def counts(self) -> tuple[tuple[str, int], ...]:
        return tuple((s, sum(1 for c in self.checks if c.status == s)) for s in STATUSES)
