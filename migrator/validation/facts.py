"""The facts a validation child reports about the program, as typed records (part of :mod:`.records`).

The child still builds them as dicts while it runs (a crash keeps what was known); the worker freezes them
with the status, strictly: a fact of the wrong kind is a :class:`~.records.RecordError` naming the status
file and the field. Their JSON shape is the one the child has always written (``"class"`` of a scaler;
``"scaler"`` left out where it was not recorded, ``null`` where the program has no scaler). Also here: the
check row both sides write (S0's plan checks, a variant's checks, the parent's extra rows).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypedDict, TypeVar

from .verdict import Verdict

if TYPE_CHECKING:
    from cattrs import Converter


class CheckRow(TypedDict, total=False):
    """One named check of a stage, as the result JSON lists it (keys in the order they are set)."""

    check: str
    status: Verdict
    message: str
    metric: str
    worst: float
    threshold: float
    original: str  # the precision policy row: each side's policy in one line
    migrated: str
    tensors: int
    worst_tensor: str


# ------------------------------------------------------------------------------ precision (policy_probe)
@dataclass(frozen=True, kw_only=True)
class PolicyFacts:
    """Autocast and dtypes during the first training step (``policy_probe.PolicyProbe.facts``)."""

    module_forwards: int = 0
    autocast_on: int = 0
    autocast_dtype: str | None = None
    activation_dtypes: Mapping[str, int] = field(default_factory=dict)  # dtype -> module outputs
    param_dtypes: Mapping[str, int] = field(default_factory=dict)
    grad_dtypes: Mapping[str, int] = field(default_factory=dict)
    autocast_regions: Mapping[str, str] = field(default_factory=dict)  # module -> autocast dtype or "off"


@dataclass(frozen=True, kw_only=True)
class ScalerFacts:
    """The loss scaler's configuration and trajectory (``policy_probe.scaler_config`` + ``ScalerTrajectory``);
    the settings only where the scaler is on and holds a number."""

    class_name: str  # JSON "class"
    enabled: bool
    init_scale: float | None = None
    growth_factor: float | None = None
    backoff_factor: float | None = None
    growth_interval: float | None = None
    dynamic: bool | None = None
    trajectory: tuple[float, ...] | None = None  # the scale after each update()
    skipped_steps: int | None = None

    def setting(self, key: str) -> float | bool | None:
        """A setting by its JSON name (``init_scale``, ..., ``dynamic``)."""
        value: float | bool | None = getattr(self, key)
        return value


@dataclass(frozen=True, kw_only=True)
class PrecisionFacts:
    """A side's effective precision policy: ``ScriptStatus.precision`` (and the base of :class:`TrainingFacts`).
    ``scaler_recorded`` is no JSON key: whether the JSON holds ``"scaler"`` at all (``null``: no scaler)."""

    policy: PolicyFacts | None = None
    scaler: ScalerFacts | None = None
    scaler_recorded: bool = False


@dataclass(frozen=True, kw_only=True)
class PhaseEvent:
    """One phase of the program's training step (``phase_probe.PhaseProbe``)."""

    step: int
    phase: str
    state: tuple[float, ...]  # per-parameter grad norms (update norms for "step")
    args: Mapping[str, bool | int | float | str] = field(default_factory=dict)


# the original's training runs with its weights nudged by fp32 rounding (``train["fp32~noise"]``): each
# update's noise floor (child/execute.nudge_weights, parent/comparison/compare_train.py)
NOISE_SUFFIX = "~noise"


def noise_run(sample: int) -> str:
    """The policy name of the original's ``sample``-th stochastically rounded bf16 run (``runs["bf16~noise0/step0"]``):
    R's per-tensor noise floor (child/stochastic_rounding.py, parent/comparison/graders.py)."""
    return f"bf16{NOISE_SUFFIX}{sample}"


@dataclass(frozen=True, kw_only=True)
class TrainingFacts(PrecisionFacts):
    """One policy's k real training steps (``execute.train_updates`` plus the dump folder)."""

    steps: int
    losses: tuple[float, ...] = ()
    optimizer: str = ""
    train_step: bool = False  # the program's own train_step ran (else backward() + step())
    phases: tuple[PhaseEvent, ...] = ()
    dir: str


# ------------------------------------------------------------------------------ dropout (child.dropout)
@dataclass(frozen=True, kw_only=True)
class DropoutStatistics:
    """Forwards with dropout on, one seed each (``dropout.statistics``), or the error that stopped them."""

    sites: Mapping[str, tuple[float, ...]] = field(default_factory=dict)
    losses: tuple[float, ...] = ()
    kept: Mapping[str, tuple[float, float]] = field(default_factory=dict)  # site -> (kept, total) elements
    error: str | None = None


@dataclass(frozen=True, kw_only=True)
class DropoutFacts:
    """A side's dropout: its sites and rates, whether the numeric runs neutralised it, and (S1, when the
    original applies any) the statistics; a script's keep share per site (``Dropout.facts``)."""

    sites: Mapping[str, tuple[float, ...]] = field(default_factory=dict)  # site -> rates
    neutralised: bool = False
    statistics: DropoutStatistics | None = None
    kept: Mapping[str, float] = field(default_factory=dict)


# ------------------------------------------------------------------------------ benchmark (child.bench)
@dataclass(frozen=True, kw_only=True)
class CommShare:
    """Time in collectives / step time over the profiled steps, in total and per kind (JSON: "all-reduce", ...)."""

    total: float
    all_reduce: float
    all_gather: float
    reduce_scatter: float
    all_to_all: float
    profiled_steps: int
    note: str | None = None

    def share(self, kind: str) -> float:
        """By the kind's JSON name (``total``, ``all-reduce``, ...)."""
        value: float = getattr(self, kind.replace("-", "_"))
        return value


@dataclass(frozen=True, kw_only=True)
class PeakMemory:
    bytes: int
    kind: str  # what was measured: the device's max_memory_allocated or the host's peak RSS


# ------------------------------------------------------------------------------ JSON hooks
PrecisionT = TypeVar("PrecisionT", bound=PrecisionFacts)
PhaseArg = bool | int | float | str


def register(conv: Converter) -> None:
    """The records' converter: the scaler's ``class`` key, the scaler's presence, phase arguments as given."""
    from cattrs.gen import make_dict_structure_fn, make_dict_unstructure_fn, override

    renamed = override(rename="class")
    conv.register_structure_hook(ScalerFacts, make_dict_structure_fn(
        ScalerFacts, conv, _cattrs_forbid_extra_keys=True, class_name=renamed))
    conv.register_unstructure_hook(ScalerFacts, make_dict_unstructure_fn(
        ScalerFacts, conv, _cattrs_omit_if_default=True, class_name=renamed))
    for cls in (PrecisionFacts, TrainingFacts):
        hidden = override(omit=True)
        conv.register_structure_hook(cls, _scaler_presence_in(cls, make_dict_structure_fn(
            cls, conv, _cattrs_forbid_extra_keys=True, scaler_recorded=hidden)))
        conv.register_unstructure_hook(cls, _scaler_presence_out(make_dict_unstructure_fn(
            cls, conv, scaler_recorded=hidden)))
    conv.register_structure_hook_func(lambda t: t == PhaseArg, _phase_arg)
    absent = override(omit_if_default=True)  # written only where the child wrote them
    conv.register_unstructure_hook(DropoutStatistics, make_dict_unstructure_fn(DropoutStatistics, conv, error=absent))
    conv.register_unstructure_hook(DropoutFacts, make_dict_unstructure_fn(DropoutFacts, conv, statistics=absent,
                                                                          kept=absent))
    hyphens = {"all_reduce": override(rename="all-reduce"), "all_gather": override(rename="all-gather"),
               "reduce_scatter": override(rename="reduce-scatter"), "all_to_all": override(rename="all-to-all")}
    conv.register_structure_hook(CommShare, make_dict_structure_fn(
        CommShare, conv, _cattrs_forbid_extra_keys=True, **hyphens))  # type: ignore[arg-type]
    conv.register_unstructure_hook(CommShare, make_dict_unstructure_fn(
        CommShare, conv, **hyphens, note=override(omit_if_default=True)))  # type: ignore[arg-type]


def _scaler_presence_in(cls: type[PrecisionT], base: Callable[[Any, Any], PrecisionT]
                        ) -> Callable[[Any, Any], PrecisionT]:
    def structure(data: Any, _: Any) -> PrecisionT:
        found = base(data, cls)
        return dataclasses.replace(found, scaler_recorded="scaler" in data)

    return structure


def _scaler_presence_out(base: Callable[[Any], dict[str, Any]]) -> Callable[[PrecisionFacts], dict[str, Any]]:
    def unstructure(facts: PrecisionFacts) -> dict[str, Any]:
        out = base(facts)
        if not facts.scaler_recorded:
            out.pop("scaler", None)
        return out

    return unstructure


def _phase_arg(value: object, _: object) -> PhaseArg:
    """A phase's argument as the probe noted it (a number or string; never converted)."""
    if not isinstance(value, (bool, int, float, str)):
        raise TypeError(f"expected a number, bool or string, found {type(value).__name__}")
    return value
