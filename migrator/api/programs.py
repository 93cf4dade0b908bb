"""The api of the commands that run the user's program in child processes: `migrate validate` and
`migrate plan`. The migrate step comes in from `migrator.api` as a callable, so nothing here imports it."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from migrator.ground.config import find_root
from migrator.ground.usage_error import UsageError

if TYPE_CHECKING:  # the programs' layers are imported when a command runs
    from migrator.plan.calibrate import Calibration
    from migrator.plan.runner import PlanResult
    from migrator.validation.parent.interop.msprobe_compare import MsprobeComparison
    from migrator.validation.parent.kernel_check import KernelValidation
    from migrator.validation.parent.results import ValidationResult


def validate(original: str | Path, *, migrate: Callable[[str, str], list[str]] | None = None,
             progress: Callable[[str], None] | None = None, **options: Any) -> ValidationResult:
    """`migrate validate ORIGINAL`: staged BF16 diff validation of the migrated program (S0 plan,
    S1 parity-1card, S2 parity-dp, S3 parity-mp). Keyword options are the fields of
    `migrator.validation.parent.options.Options` (`migrated`, `stages`, `force`, `entry`, `seed`, `steps`,
    `world_size`, `plan_world_size`, `record`, `compare`, `script`, `bench`, `bench_steps`, `repeats`,
    `peak_tflops`, ...). Without `migrated` the tree
    is first migrated with `fix(target="npu", out_dir=<temp>)`. The programs run only in child
    processes. Returns a frozen `migrator.validation.parent.results.ValidationResult` (its `exit_code` is
    0 pass/warn, 1 a stage fails, 2 the validation could not run); bad arguments raise UsageError."""
    from migrator.validation.parent.options import Options
    from migrator.validation.parent.stages import ValidationSetupError, run

    path = Path(original)
    if not path.is_dir():
        raise UsageError(f"{original}: no such directory")
    options.update(_nodes(options, options.pop("launcher_env", None)))
    _check_pythonpath(path, options.get("pythonpath", ()))
    _check_work_dir(path, options.get("work_dir"), options.get("migrated"))
    _require_validate_extra()
    try:
        opts = Options(original=str(path), **options)
    except TypeError as exc:
        raise UsageError(f"bad validate option: {exc}") from None
    try:
        return run(opts, progress=progress, migrate=migrate)
    except ValidationSetupError as exc:
        raise UsageError(str(exc)) from None


def _nodes(options: dict[str, Any], launcher_env: dict[str, str] | None) -> dict[str, Any]:
    """``nnodes`` / ``node_rank`` / ``rdzv_endpoint`` from the options, else (``launcher_env`` given: the
    command line) from the torchrun / srun environment that started us; bad ones raise UsageError."""
    from migrator.validation.parent.multinode.node_spec import NodeSpecError, resolve

    try:
        spec = resolve(options.get("nnodes", 1), options.get("node_rank", 0), options.get("rdzv_endpoint"),
                       launcher_env)
    except NodeSpecError as exc:
        raise UsageError(str(exc)) from None
    return {"nnodes": spec.nnodes, "node_rank": spec.node_rank, "rdzv_endpoint": spec.endpoint}


def compare_msprobe(target: str | Path, golden: str | Path, *, cross_device: bool = False) -> MsprobeComparison:
    """Our verdicts, localisation and argument diffs over two dump folders msprobe made (either side may be
    any msprobe dump: statistics or tensor task, L0/L1/mix, several ranks). Returns a frozen
    `migrator.validation.parent.interop.msprobe_compare.MsprobeComparison`; a folder that is not an msprobe dump
    raises UsageError naming it."""
    from migrator.validation.parent.interop.msprobe_compare import compare_dumps
    from migrator.validation.parent.interop.msprobe_dumps import MsprobeDumpError

    try:
        return compare_dumps(str(target), str(golden), cross_device=cross_device)
    except MsprobeDumpError as exc:
        raise UsageError(str(exc)) from None


KERNELS_EXTRA = "pip install 'ascend-migrate[kernels]'"


def validate_kernel(kernel: str, kernel_args: str, grid: str, *, port: Callable[[str, str], tuple[str, list[str]]],
                    ported: str | None = None, cores: int = 3, seed: int = 0, timeout: float = 600) -> KernelValidation:
    """`migrate validate --kernel FILE::KERNEL --kernel-args SPEC --grid G`: the kernel of FILE and of its port
    (`ported`, else FILE ported by `port(file, temp dir)`) run on the same random inputs under upstream
    Triton's interpreter; every tensor argument compared. A persistent port (its `N_PROGRAMS` parameter) runs
    on `cores` programs. Returns a frozen `KernelValidation` (`exit_code` 0 pass/warn, 1 fail, 2 not run);
    bad arguments, a missing file or a missing `triton` raise UsageError."""
    import importlib.util
    import tempfile

    from migrator.validation.kernel_spec import KernelSpecError, parse_args, parse_grid, parse_kernel
    from migrator.validation.parent.kernel_check import check_kernel

    try:
        ref, args, dims = parse_kernel(kernel), parse_args(kernel_args), parse_grid(grid)
    except KernelSpecError as exc:
        raise UsageError(str(exc)) from None
    for path in (ref.path, ported):
        if path is not None and not Path(path).is_file():
            raise UsageError(f"{path}: no such file")
    missing = [name for name in ("triton", "torch", "numpy") if importlib.util.find_spec(name) is None]
    if missing:
        raise UsageError(f"migrate validate --kernel needs {', '.join(missing)} (upstream Triton's interpreter runs "
                         f"the kernels on this CPU): {KERNELS_EXTRA}")
    with tempfile.TemporaryDirectory(prefix="migrate-port-") as work:
        if ported is None:
            ported, errors = port(ref.path, work)
            if errors:
                raise UsageError(f"{ref.path}: the port failed: {'; '.join(errors)}")
        return check_kernel(ref.path, ported, ref.kernel, args, dims, cores=cores, seed=seed, timeout=timeout)


def _require_validate_extra() -> None:
    """One clear line before anything runs, not a child process failing on its first import."""
    import importlib.util

    missing = [name for name in ("torch", "numpy", "safetensors", "cattrs") if importlib.util.find_spec(name) is None]
    if missing:
        raise UsageError(f"migrate validate needs {', '.join(missing)} (the `validate` extra): "
                         "pip install 'ascend-migrate[validate]' (with the torch build for your machine)")


def plan(model: str | Path, clusters: Sequence[str], *, global_batch: int, seq: int, root: str | Path | None = None,
         entry: str | None = None, check_s0: bool = False, progress: Callable[[str], None] | None = None,
         validate: Callable[..., Any] = validate, **options: Any) -> PlanResult:
    """`migrate plan`: rank parallel layouts for MODEL (a tree with validate.py, read on the meta device in a
    child process, or a HF / Megatron config JSON) on each named cluster profile. Options: `dtype`, `devices`,
    `top`, `failure_rate`, `checkpoint_seconds`, `layout` (a `--layout` string or a Layout: evaluate it instead of
    searching), `assume` (KEY=VALUE strings over `assumptions`, or over a cluster figure: flagged user), `explain`, `strict`
    (refuse a cluster whose figures are not all measured or first-party). `check_s0` (trees only) runs `validate` S0 on the fake
    process group for each cluster's best layout and records its status in the plan. Returns a frozen
    `migrator.plan.runner.PlanResult`; bad input (unknown cluster, unreadable model) raises UsageError."""
    from migrator.plan import clusters as cluster_profiles
    from migrator.plan import runner
    from migrator.plan.assumptions import AssumptionError, parse_assume
    from migrator.plan.configs import from_config
    from migrator.plan.layout_spec import LayoutSyntaxError, parse_layout
    from migrator.plan.model import ModelError
    from migrator.plan.probe import probe_tree

    path = Path(model)
    try:
        layout = options.pop("layout", None)
        if isinstance(layout, str):  # parsed before the (slow) probe: a malformed one is a usage error
            options["layout"] = parse_layout(layout, options.get("devices"))
        elif layout is not None:
            options["layout"] = layout
        assume, figures = cluster_profiles.split_assume(tuple(options.pop("assume", None) or ()))
        options["assumptions"] = parse_assume(assume, options.get("assumptions"))
        options["assumed"] = frozenset(pair.partition("=")[0].strip().replace("-", "_") for pair in assume)
        if figures:
            options["figures"] = figures
        if not path.exists():
            raise UsageError(f"{model}: no such model tree or config file")
        found_root = Path(root) if root else find_root([path if path.is_dir() else Path.cwd()])
        profiles = cluster_profiles.load(list(clusters), found_root)  # before the (slow) probe
        shape = probe_tree(str(path), entry) if path.is_dir() else from_config(path)
        result = runner.plan(shape, profiles, global_batch=global_batch, seq=seq, **options)
    except (ModelError, cluster_profiles.ClusterError, LayoutSyntaxError, AssumptionError) as exc:
        raise UsageError(str(exc)) from None
    if not check_s0:
        return result
    if not path.is_dir():
        raise UsageError("--check-s0 needs MODEL to be a tree with the validate.py protocol, not a config file")
    checked = []
    for cp in result.clusters:
        if cp.top:
            s0 = cp.s0
            run = validate(str(path), progress=progress, stages=("S0",), entry=entry,
                           plan_world_size=s0["plan_world_size"], plan_tp=s0["plan_tp"])
            stage = next(st for st in run.stages if st.id == "S0")
            cp = replace(cp, s0={**s0, "status": stage.status, "summary": stage.summary})
        checked.append(cp)
    return replace(result, clusters=tuple(checked))


def calibrate_plan(model: str | Path | None, runs: Sequence[str | Path], logs: Sequence[str | Path] = (), *,
                   clusters: Sequence[str] = (), root: str | Path | None = None, layout: str | None = None,
                   global_batch: int | None = None, seq: int | None = None, dtype: str = "bf16",
                   assume: Sequence[str] = (), entry: str | None = None,
                   today: str | None = None) -> tuple[Path, Calibration]:
    """`migrate plan --calibrate RUN.json` / `--calibrate-log FILE`: fit the cluster's efficiencies to the
    measured steps (`migrator.plan.calibrate`) and write them, flagged calibrated, into the project's
    pyproject.toml. MODEL (a tree or a config) serves the runs that do not name their model; a log's run uses
    `layout`, `global_batch` and `seq`. Returns the file written and the calibration; bad or impossible
    input raises UsageError naming the file and the field."""
    from migrator.plan import calibrate as calibration
    from migrator.plan import clusters as cluster_profiles
    from migrator.plan.assumptions import AssumptionError, parse_assume
    from migrator.plan.calibrate_input import CalibrationInputError, read_log, read_runs
    from migrator.plan.configs import from_config
    from migrator.plan.layout_spec import LayoutSyntaxError, parse_layout
    from migrator.plan.model import ModelError

    try:
        rest, figures = cluster_profiles.split_assume(tuple(assume))
        base = parse_assume(rest)
        measured = [run for f in runs for run in read_runs(f, from_config, parse_layout)]
        if logs and not (layout and global_batch and seq):
            raise UsageError(f"--calibrate-log {logs[0]}: a log does not state its run: give --layout (the layout it "
                             "ran), --global-batch and --seq")
        measured += [read_log(f, parse_layout(layout or ""), global_batch or 0, seq or 0) for f in logs]
        named = {run.cluster for run in measured if run.cluster} | set(clusters)
        if len(named) != 1:
            raise UsageError("--calibrate fits one cluster: " + (
                f"the runs and --cluster name {', '.join(sorted(named))}" if named else
                "give --cluster NAME or a \"cluster\" field in the run record"))
        found_root = Path(root) if root else find_root([Path(model) if model and Path(model).is_dir() else Path.cwd()])
        cluster = cluster_profiles.load(list(named), found_root)[0]
        cluster = cluster.with_figures(figures) if figures else cluster
        result = calibration.fit(measured, calibration.model_of_runs(model, entry), cluster, base, dtype, today)
        return calibration.write(found_root, result), result
    except (CalibrationInputError, ModelError, cluster_profiles.ClusterError, LayoutSyntaxError,
            AssumptionError) as exc:
        raise UsageError(str(exc)) from None


def _check_pythonpath(original: Path, folders: Any) -> None:
    """`--pythonpath` names folders inside each tree: relative, not leaving it, present in the original."""
    import os

    for folder in folders:
        norm = os.path.normpath(folder)
        if os.path.isabs(folder) or norm == ".." or norm.startswith(".." + os.sep):
            raise UsageError(f"--pythonpath {folder}: give a folder relative to the tree root, inside it "
                             "(each side uses its own tree's copy)")
        if not (original / norm).is_dir():
            raise UsageError(f"--pythonpath {folder}: no such folder in {original}")


def _check_work_dir(original: Path, work_dir: str | None, migrated: str | None) -> None:
    """The migrated copy is written into the work folder: inside the original tree it would be copied into
    itself on the next run (the same rule as `fix --out`)."""
    if work_dir is None or migrated is not None:
        return
    work, tree = Path(work_dir).resolve(), original.resolve()
    if work == tree or work.is_relative_to(tree):
        raise UsageError(f"--work-dir {work_dir}: inside the tree being validated ({original}), where the migrated "
                         "copy would be copied into itself on the next run; choose a folder outside it")

