"""The contract between the two sides of validation: typed, frozen job and status records.

The parent (orchestration, :mod:`.parent`, in the user's process) writes a *job* as ``job.json``; the
child (:mod:`.child`, the program's own process) reads it, runs, and writes a *status*
(``status.json``, ``status_rank<r>.json`` for ranks), which the parent reads back. Both directions go
through this module only, and strictly: a field that is not in the record, a missing required field or
a value of the wrong kind is a :class:`RecordError` naming the file and the field, so the two sides
cannot drift apart silently. JSON shape: the record's fields by name (``kind`` added for jobs);
nested records are objects, tuples are arrays. cattrs does the (de)structuring; it is imported on
first use, so importing this module costs nothing.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Literal, TypeVar

from .facts import CheckRow, CommShare, DropoutFacts, PeakMemory, PrecisionFacts, TrainingFacts
from .facts import register as register_facts

if TYPE_CHECKING:
    from cattrs import Converter

    from migrator.ground.jsonfile import JsonObject, JsonValue

Side = Literal["original", "migrated"]
# entry: the protocol could not be loaded (exit 2); run: the program failed; harness: the validation
# machinery failed; skipped: the other side failed first; nan: a benchmark step was not finite
Phase = Literal["entry", "run", "harness", "skipped", "nan"]

# the protocol's parallelize(model, mesh, stage) name of each parallel variant
STAGE_OF: Mapping[str, str] = {"ddp": "dp", "fsdp2": "fsdp", "tp": "tp", "ep": "ep"}
# variants whose ranks each run their own micro-batch (the others run the full batch)
DATA_PARALLEL = ("ddp", "fsdp2", "ep")


class RecordError(ValueError):
    """A job or status file does not match its record."""


# ------------------------------------------------------------------------------------ jobs
@dataclass(frozen=True, kw_only=True)
class Job:
    """What every child is told: the tree, where to write, the determinism settings."""

    KIND: ClassVar[str] = ""
    tree: str
    out: str
    seed: int = 0
    threads: int = 1
    entry: str | None = None
    other_tree: str | None = None  # the other side's tree: nothing is imported from it (child/provenance.py)
    pythonpath: tuple[str, ...] = ()  # folders of this tree (relative to it) put first on sys.path (--pythonpath)


def other_tree(tree: str, original: str, migrated: str) -> str | None:
    """The tree a side running ``tree`` must not import from (None: both sides run one tree, ``--record``)."""
    other = migrated if tree == original else original
    return other if other and os.path.realpath(other) != os.path.realpath(tree) else None


@dataclass(frozen=True, kw_only=True)
class SideJob(Job):
    """S1 on one side (the original writes the shared weights and batches; the migrated waits for them)."""

    KIND: ClassVar[str] = "side"
    side: Side
    shared: str
    steps: tuple[int, ...]
    policies: tuple[str, ...] = ("fp32", "bf16")
    bf16_policy: str = "amp"
    max_bytes: int = 1 << 30
    wait_timeout: float = 600.0
    recorded: bool = False
    optimizer: bool = True
    device: str | None = None  # --device of --record / --compare; None: what answers


@dataclass(frozen=True, kw_only=True)
class PlanJob(Job):
    """S0: the parallel plan at the real world size on the fake process group."""

    KIND: ClassVar[str] = "plan"
    world_size: int
    tp: int | None = None
    dp_variants: tuple[str, ...] = ("ddp", "fsdp2")
    batch_step: int = 0


@dataclass(frozen=True, kw_only=True)
class ParallelJob(Job):
    """One rank of S2 (data parallel) or S3 (model parallel) under torchrun."""

    KIND: ClassVar[str] = "parallel"
    stage: Literal["S2", "S3"]
    variants: tuple[str, ...]  # ddp, fsdp2 (S2); tp, ep (S3)
    steps: tuple[int, ...]
    bf16_policy: str = "amp"
    max_bytes: int = 1 << 30


@dataclass(frozen=True, kw_only=True)
class BenchJob(Job):
    """One benchmark repeat of one side (``--bench``), one process or one rank of torchrun."""

    KIND: ClassVar[str] = "bench"
    side: Side
    stage: str
    steps: int
    warmup: int = 2
    profile_steps: int = 2
    batch_step: int = 0
    bf16_policy: str = "amp"
    variant: str | None = None


@dataclass(frozen=True, kw_only=True)
class TraceJob(Job):
    """One forward of an S1 step with the op tracer inside one module (first divergent op)."""

    KIND: ClassVar[str] = "optrace"
    side: Side
    shared: str
    module: str
    step: int
    policy: str
    bf16_policy: str = "amp"


@dataclass(frozen=True, kw_only=True)
class ScriptJob(Job):
    """An unmodified training script under global hooks (``--script``)."""

    KIND: ClassVar[str] = "script"
    side: Side
    policy: Literal["as_is", "fp32"]
    script: str
    shared: str
    args: tuple[str, ...] = ()
    curve_steps: int = 3
    writes_weights: bool = False
    distributed: bool = False
    wait_timeout: float = 600.0
    max_bytes: int = 1 << 30


JOB_KINDS: dict[str, type[Job]] = {cls.KIND: cls for cls in (SideJob, PlanJob, ParallelJob, BenchJob, TraceJob,
                                                              ScriptJob)}


# ------------------------------------------------------------------------------------ statuses
@dataclass(frozen=True, kw_only=True)
class Failure:
    """Why a child did not finish (from :func:`migrator.validation.child.errors.describe`)."""

    summary: str
    type: str | None = None
    traceback: str | None = None
    during: str | None = None
    active_modules: tuple[str, ...] = ()
    harness_frame: str | None = None  # our frame, where our own code raised (a harness error: exit 2)


@dataclass(frozen=True, kw_only=True)
class ImportedFrom:
    """A module and the file it came from; ``own``: this side's copy it was loaded from instead ("" none)."""

    module: str
    path: str
    own: str = ""


@dataclass(frozen=True, kw_only=True)
class Provenance:
    """Which tree this side's project modules came from (:mod:`.child.provenance`)."""

    tree: str
    other: str
    own_modules: tuple[str, ...] = ()  # top-level modules loaded from this side's tree
    served: tuple[str, ...] = ()  # top-level names of this tree served from its root or src/ by name
    redirected: tuple[ImportedFrom, ...] = ()  # the other tree's place, loaded from this tree's copy
    foreign: tuple[ImportedFrom, ...] = ()  # loaded (or refused) from the other tree: the run is refused

    def refusal(self, side: str) -> str | None:
        """Why this run cannot count, or None."""
        if not self.foreign:
            return None
        first = self.foreign[0]
        more = f" (and {len(self.foreign) - 1} more)" if len(self.foreign) > 1 else ""
        return (f"the {side} side imported {first.module} from the other side's tree ({first.path}){more}, "
                f"not from its own ({self.tree}): give this tree its own copy of it, or make it importable "
                "from inside the tree (a package at the tree root or in src/ is found by itself)")


@dataclass(frozen=True, kw_only=True)
class Status:
    """What every child reports; a child that failed before its own work sets ``phase`` and ``error``."""

    ok: bool = False
    phase: Phase | None = None
    error: Failure | None = None
    side: Side | None = None
    rank: int | None = None
    world_size: int | None = None
    device: str | None = None
    layers: Mapping[str, str] = field(default_factory=dict)  # reference layer -> what it is
    manifest: Mapping[str, Any] = field(default_factory=dict)  # determinism settings and versions
    entry: str | None = None  # the protocol's source
    timings: Mapping[str, float] = field(default_factory=dict)
    notes: tuple[str, ...] = ()
    provenance: Provenance | None = None  # set when the job named the other side's tree


@dataclass(frozen=True, kw_only=True)
class OptimizerRun:
    name: str
    dir: str
    semantic: Mapping[str, Any] | None = None


@dataclass(frozen=True, kw_only=True)
class BuiltTensor:
    """One parameter or buffer as the side's own ``make_model`` built it from the seed (child/built_state.py)."""

    cls: str  # the class of the module holding it
    shape: tuple[int, ...]
    dtype: str
    mean: float
    std: float
    min: float
    max: float
    digest: str = ""  # sha256 of an integer or bool tensor's values (exact: an index or mask buffer); "" for floats


@dataclass(frozen=True)
class FusedNormCall:
    """One fused norm call (``npu_rms_norm``) of the side's first fp32 step (child/fused_args.py)."""

    module: str  # the innermost module running it
    op: str
    eps: float
    given: bool  # False: the op's own default


@dataclass(frozen=True, kw_only=True)
class SideStatus(Status):
    tree: str | None = None
    runs: Mapping[str, str] = field(default_factory=dict)  # "fp32/step0" -> dump folder
    weights_sha256: str | None = None
    batch_sha256: Mapping[str, str] = field(default_factory=dict)  # step -> hash of the shared batch
    own_batch_sha256: Mapping[str, str] = field(default_factory=dict)  # step -> hash of this side's own batch
    dropout_active: tuple[str, ...] = ()
    dropout: DropoutFacts = field(default_factory=DropoutFacts)
    optimizer: OptimizerRun | None = None
    train: Mapping[str, TrainingFacts] = field(default_factory=dict)  # policy -> its k training steps
    shared_root: str | None = None  # set in a recorded reference: the folder the paths above point into
    built: Mapping[str, BuiltTensor] = field(default_factory=dict)  # the model as built, before the shared weights
    module_eps: Mapping[str, float] = field(default_factory=dict)  # module -> the eps it holds (as built)
    fused_norms: tuple[FusedNormCall, ...] = ()  # fused norm calls of the first fp32 step, with their eps


@dataclass(frozen=True, kw_only=True)
class PlanStatus(Status):
    checks: tuple[CheckRow, ...] = ()
    summary: str = ""
    bench: Mapping[str, float] = field(default_factory=dict)
    declared: tuple[str, ...] = ()  # the parallelize stages the program implements


@dataclass(frozen=True, kw_only=True)
class VariantRuns:
    how: str
    runs: Mapping[str, Mapping[str, Mapping[str, str]]] = field(default_factory=dict)  # step -> rank -> run -> dir
    checks: tuple[CheckRow, ...] = ()
    seconds: float = 0.0


@dataclass(frozen=True, kw_only=True)
class RankStatus(Status):
    backend: str | None = None
    weights_sha256: str | None = None
    variants: Mapping[str, VariantRuns] = field(default_factory=dict)
    skipped: Mapping[str, str] = field(default_factory=dict)  # variant -> why it does not apply
    replicas: Mapping[str, bool] = field(default_factory=dict)  # "ddp/fp32" -> every rank holds the same grads


@dataclass(frozen=True, kw_only=True)
class BenchStatus(Status):
    how: str | None = None
    dtype: str | None = None
    device_name: str | None = None
    flops_per_step: int | None = None
    flops_by_op: Mapping[str, int] = field(default_factory=dict)
    step_times: tuple[float, ...] = ()
    comm_share: CommShare | None = None  # None: no step was profiled
    samples_per_step: int | None = None
    tokens_per_step: int | None = None
    peak_memory: PeakMemory | None = None
    nan_step: int | None = None


@dataclass(frozen=True, kw_only=True)
class TraceStatus(Status):
    ops: int = 0


@dataclass(frozen=True, kw_only=True)
class ScriptStatus(Status):
    policy: str | None = None
    precision: PrecisionFacts | None = None  # the effective precision policy at step 0, the scaler after the run
    input_sha256: str | None = None
    weights_sha256: str | None = None
    backward_grads: bool = False
    step0: str | None = None  # dump folder of step 0
    train: str | None = None  # dump folder of the parameter updates
    losses: tuple[float, ...] = ()
    steps: int = 0
    seconds: float = 0.0
    stopped: str | None = None
    dropout: DropoutFacts = field(default_factory=DropoutFacts)  # the script's dropout sites (neutralised throughout)


STATUS_OF: dict[str, type[Status]] = {"side": SideStatus, "plan": PlanStatus, "parallel": RankStatus,
                                      "bench": BenchStatus, "optrace": TraceStatus, "script": ScriptStatus}

# ------------------------------------------------------------------------------------ JSON
RecordT = TypeVar("RecordT")
_converter: Converter | None = None


def _cattrs() -> Converter:
    global _converter
    if _converter is None:
        from migrator.ground.serialise import bare_converter

        _converter = bare_converter()  # strict: "12" is no int, 1 no bool
        register_facts(_converter)
    return _converter


def prepare_converter() -> None:
    """Build the converter and the hooks of every job and status kind now (a zygote, before it forks: each
    worker would otherwise import cattrs and generate them again)."""
    converter = _cattrs()
    for cls in (*JOB_KINDS.values(), *STATUS_OF.values()):
        converter.get_structure_hook(cls)
        converter.get_unstructure_hook(cls)


def to_json(record: Any) -> JsonObject:
    """The record as a JSON-able dict (a job also names its ``kind``)."""
    data: JsonObject = _cattrs().unstructure(record)
    kind = getattr(record, "KIND", "")
    return {"kind": kind, **data} if kind else data


def from_json(data: JsonValue | Mapping[str, object], cls: type[RecordT], where: str = "") -> RecordT:
    """``data`` (a JSON value read from a file, or a runner's status dict) as a ``cls`` record;
    :class:`RecordError` says which field is wrong."""
    import cattrs

    if not isinstance(data, Mapping):
        raise RecordError(f"{where or cls.__name__}: expected a JSON object, found {type(data).__name__}")
    try:
        return _cattrs().structure(dict(data), cls)
    except cattrs.BaseValidationError as exc:
        problems = "; ".join(cattrs.transform_error(exc, path=cls.__name__))
        raise RecordError(f"{where + ': ' if where else ''}{problems}") from None
    except (TypeError, ValueError) as exc:
        raise RecordError(f"{where + ': ' if where else ''}{cls.__name__}: {exc}") from None


def job_from_json(data: JsonValue, where: str = "", cls: type[Job] | None = None) -> Job:
    """``data`` as the job record its ``kind`` names (one of ``JOB_KINDS``, or ``cls``'s own kind)."""
    fields = data if isinstance(data, dict) else {}
    kind = fields.get("kind")
    kinds = {cls.KIND: cls} if cls is not None else JOB_KINDS
    found = kinds.get(kind) if isinstance(kind, str) else None
    if found is None:
        raise RecordError(f"{where or 'job'}: unknown job kind {kind!r} (known: {', '.join(kinds)})")
    return from_json({k: v for k, v in fields.items() if k != "kind"}, found, where)


def write(record: Any, path: str) -> None:
    """Write ``record`` to ``path`` atomically (a reader never sees half a file)."""
    from migrator.ground.safe_write import write_text

    write_text(path, json.dumps(to_json(record), indent=1, default=str))


def read_job(path: str, cls: type[Job] | None = None) -> Job:
    try:
        with open(path, encoding="utf-8") as fh:
            data = json.load(fh)
    except json.JSONDecodeError as exc:
        raise RecordError(f"{path}: not JSON ({exc})") from None
    return job_from_json(data, path, cls)


def read_status(path: str, cls: type[RecordT]) -> RecordT:
    try:
        with open(path, encoding="utf-8") as fh:
            data = json.load(fh)
    except json.JSONDecodeError as exc:
        raise RecordError(f"{path}: not JSON ({exc})") from None
    return from_json(data, cls, path)
