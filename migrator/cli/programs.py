"""`migrate validate` and `migrate plan`: the commands that run the user's program in child processes."""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING, Any

import click

from migrator.cli.support import (
    CLEAN_ENV_HELP,
    ProgressDisplay,
    _Errors,
    _fail,
    _int_list,
    child_environment,
    write_output,
)

if TYPE_CHECKING:
    from migrator.validation.parent.results import ValidationResult


@click.command(context_settings={"allow_interspersed_args": True})
@click.argument("original", type=click.Path(path_type=str), required=False)
@click.argument("script_args", nargs=-1, type=click.UNPROCESSED)
@click.option("--migrated", type=click.Path(file_okay=False), help="The migrated tree [default: `migrate fix --target npu` into a temp dir].")
@click.option("--stages", default="S0,S1,S2,S3", show_default=True, help="Stages to run (comma-separated): S0 plan, S1 parity-1card, S2 parity-dp, S3 parity-mp.")
@click.option("--force", is_flag=True, help="Run later stages even after a stage fails.")
@click.option("--entry", help="Protocol object as module[:object] [default: validate.py at the tree root].")
@click.option("--script", help="Script mode: run this unmodified training script (ARGS after --) on both sides.")
@click.option("--pythonpath", "pythonpath", multiple=True, metavar="DIR", help="A folder of each tree (relative to its root) the program imports from, as PYTHONPATH would; each side uses its own tree's folder. Repeatable.")
@click.option("--curve-steps", type=click.IntRange(min=1), default=5, show_default=True, help="Script mode: steps of the loss curve (a smoke check, not a gate).")
@click.option("--seed", type=int, default=0, show_default=True, help="Seed for weights, data order and every RNG.")
@click.option("--steps", help="S1 batches, e.g. 0,1 [default: 0,1].")
@click.option("--nproc-per-node", "--world-size", "nproc", type=click.IntRange(min=1), default=2, show_default=True, help="S2/S3 ranks per node.")
@click.option("--nnodes", type=click.IntRange(min=1), default=1, show_default=True, help="S2/S3 nodes: run the same command on each (with --node-rank, --rdzv-endpoint) [default: 1, or what torchrun/srun started us with].")
@click.option("--node-rank", type=click.IntRange(min=0), default=0, show_default=True, help="This node (0 gathers every node's records and compares).")
@click.option("--rdzv-endpoint", help="Node 0's HOST:PORT (its rendezvous store) for --nnodes > 1.")
@click.option("--plan-world-size", type=click.IntRange(min=1), default=8, show_default=True, help="S0: the real target world size (8, 64, 384, ...).")
@click.option("--plan-tp", type=click.IntRange(min=1), help="S0: tensor-parallel degree [default: 2 when the program declares tp].")
@click.option("--bf16-policy", type=click.Choice(["amp", "pure"]), default="amp", show_default=True, help="amp: autocast over fp32 master weights; pure: model.to(bfloat16).")
@click.option("--threads", type=click.IntRange(min=1), default=1, show_default=True, help="Threads per child process (fixed for determinism).")
@click.option("--timeout", type=click.FloatRange(min=1), default=600, show_default=True, help="Seconds per child process.")
@click.option("--work-dir", type=click.Path(file_okay=False), help="Keep dumps (safetensors + dump.json) here.")
@click.option("--record", type=click.Path(), help="Run the reference side only and save it (dir, or .tar/.tar.gz).")
@click.option("--compare", type=click.Path(), help="Validate the migrated side against a --record'ed reference.")
@click.option("--device", type=click.Choice(["npu", "cuda", "cpu"]), help="--record: cuda|cpu, --compare: npu|cpu for the side run here [default: what answers].")
@click.option("--export-msprobe", type=click.Path(file_okay=False), help="Also write msprobe's layout (step<k>/rank<r>/dump_tensor_data/*.pt).")
@click.option("--max-dump-mb", type=click.IntRange(min=0), default=1024, show_default=True, help="Full tensors per recorded run; statistics only beyond.")
@click.option("-o", "--output", type=click.Path(dir_okay=False), help="Write the result JSON (validation.schema.json) to FILE.")
@click.option("--markdown", type=click.Path(dir_okay=False), help="Write the Markdown summary to FILE.")
@click.option("--csv", "csv_file", type=click.Path(dir_okay=False), help="Write every compared tensor to FILE in msprobe's compare result columns (NPU = migrated, Bench = original).")
@click.option("--format", "fmt", type=click.Choice(["text", "json", "md", "csv"]), default="text", show_default=True, help="What to print (csv: as --csv writes).")
@click.option("--quiet", "-q", is_flag=True, help="No progress (no bar on a terminal, no stage lines otherwise).")
@click.option("--verbose", "-v", is_flag=True, help="Every check with its metric, value and threshold, passing ones too.")
@click.option("--bench", is_flag=True, help="Stage benchmarks: step time, tokens/s, TFLOP/s, MFU, communication share, crash rate.")
@click.option("--bench-steps", type=click.IntRange(min=1), default=5, show_default=True, help="--bench: timed steps per repeat (after 2 warm-up steps).")
@click.option("--repeats", type=click.IntRange(min=1), default=2, show_default=True, help="--bench: repeats per stage and side (crash / hang / NaN rate).")
@click.option("--peak-tflops", type=click.FloatRange(min=0, min_open=True), help="--bench: device peak TFLOP/s for MFU [default: the sourced table].")
@click.option("--msprobe-target", type=click.Path(), help="Compare two msprobe dump folders (no ORIGINAL): the run under test ...")
@click.option("--msprobe-golden", type=click.Path(), help="... and the golden run (both made by msprobe's PrecisionDebugger).")
@click.option("--cross-device", is_flag=True, help="--msprobe-*: the dumps come from different device types (fp32 bounds x10).")
@click.option("--bench-timeout", type=click.FloatRange(min=1), default=300, show_default=True, help="--bench: seconds per repeat before it counts as a hang.")
@click.option("--clean-env", is_flag=True, help=CLEAN_ENV_HELP)
@click.option("--env", "env_names", multiple=True, metavar="NAME", help="--clean-env: also pass this variable. Repeatable.")
@click.option("--kernel", metavar="FILE::KERNEL", help="Kernel mode (no ORIGINAL): run this Triton kernel and its port under Triton's interpreter on the same random inputs.")
@click.option("--kernel-args", metavar="SPEC", help="--kernel: arguments, e.g. x:float32[4096],out:float32[4096],n=4096,BLOCK=1024,w=None,ACT='relu' (or a JSON object).")
@click.option("--grid", metavar="DIMS", help="--kernel: the launch grid of the original, e.g. 4 or 16,8.")
@click.option("--ported", type=click.Path(dir_okay=False), help="--kernel: the ported file [default: FILE after `migrate fix --target npu`, on a copy].")
@click.option("--cores", type=click.IntRange(min=1), default=3, show_default=True, help="--kernel: programs a persistent port runs on.")
def validate(original: str | None, script_args: tuple[str, ...], migrated: str | None, stages: str, force: bool,
             entry: str | None, script: str | None, curve_steps: int, seed: int, steps: str | None, nproc: int,
             nnodes: int, node_rank: int, rdzv_endpoint: str | None, plan_world_size: int, plan_tp: int | None, bf16_policy: str,
             threads: int, timeout: float, work_dir: str | None, record: str | None, compare: str | None,
             export_msprobe: str | None, max_dump_mb: int, output: str | None, markdown: str | None,
             csv_file: str | None, fmt: str,
             quiet: bool, verbose: bool, bench: bool, bench_steps: int, repeats: int, peak_tflops: float | None,
             bench_timeout: float, msprobe_target: str | None, msprobe_golden: str | None, cross_device: bool,
             device: str | None, pythonpath: tuple[str, ...], clean_env: bool, env_names: tuple[str, ...],
             kernel: str | None, kernel_args: str | None, grid: str | None, ported: str | None, cores: int) -> None:
    """Staged BF16 diff validation of a migrated program against ORIGINAL.

    Exit codes: 0 every run stage passes or warns, 1 a stage fails, 2 the validation could not run.
    Script mode: migrate validate ORIGINAL --script train.py -- ARGS
    Kernel mode: migrate validate --kernel ops.py::add_kernel --kernel-args 'x:float32[4096],n=4096' --grid 4

    Both sides of the program run with your rights, not in a sandbox: they can read and write your files
    and reach the network. Use --clean-env to keep tokens and keys in the environment away from them; run
    untrusted code in a container or VM.
    """
    with _Errors():
        from migrator import api

        if (msprobe_target or msprobe_golden) and (csv_file or fmt == "csv"):
            _fail("--csv / --format csv list the tensors of a validation run; for two msprobe dumps, "
                  "`msprobe compare` writes that table")
        if msprobe_target or msprobe_golden:
            _compare_msprobe(msprobe_target, msprobe_golden, cross_device, output, fmt, verbose)
        if kernel is not None:
            _validate_kernel(kernel, kernel_args, grid, ported, cores, seed, timeout, output, fmt, verbose)
        if original is None:
            _fail("missing ORIGINAL (the tree to validate), or give --msprobe-target and --msprobe-golden")
        _check_validate_arguments(original, script_args, script)
        chosen = tuple(s.strip().upper() for s in stages.split(",") if s.strip())
        if chosen == ("ALL",):
            chosen = ("S0", "S1", "S2", "S3")
        options: dict[str, Any] = dict(migrated=migrated, stages=chosen, force=force, entry=entry, seed=seed,
                       world_size=nproc, nnodes=nnodes, node_rank=node_rank, rdzv_endpoint=rdzv_endpoint,
                       launcher_env=dict(os.environ), plan_world_size=plan_world_size,
                       plan_tp=plan_tp, bf16_policy=bf16_policy, threads=threads, timeout=timeout, work_dir=work_dir,
                       record=record, compare=compare, device=device, export_msprobe=export_msprobe, script=script,
                       script_args=tuple(script_args), curve_steps=curve_steps, max_bytes=max_dump_mb << 20,
                       pythonpath=tuple(pythonpath))
        if bench:
            options.update(bench=True, bench_steps=bench_steps, repeats=repeats, peak_tflops=peak_tflops,
                           bench_timeout=bench_timeout)
        parsed = _int_list(steps, "--steps")
        if parsed:
            options["steps"] = parsed

        display = ProgressDisplay(quiet, steps=len(chosen) + (0 if migrated else 1))

        def progress(text: str) -> None:  # a bar on a terminal; plain log lines when stderr is a file or pipe
            if display.enabled:
                display.note(text)
            elif not quiet:
                click.echo(f"[validate] {text}", err=True)

        with display, child_environment(clean_env, env_names):
            result = api.validate(original, progress=progress, **options)
        _show_validation(result, output, markdown, fmt, verbose, csv_file)
        sys.exit(result.exit_code)


def _validate_kernel(kernel: str, kernel_args: str | None, grid: str | None, ported: str | None, cores: int, seed: int,
                     timeout: float, output: str | None, fmt: str, verbose: bool) -> None:
    from migrator import api
    from migrator.reporters.kernel_validation import render_json, render_text

    if kernel_args is None or grid is None:
        _fail("--kernel needs --kernel-args (the kernel's arguments) and --grid (the original's launch grid)")
    if fmt not in ("text", "json"):
        _fail("--kernel prints text or json")
    result = api.validate_kernel(kernel, kernel_args, grid, ported=ported, cores=cores, seed=seed, timeout=timeout)
    if output:
        write_output(render_json(result), output)
    click.echo(render_json(result) if fmt == "json" else render_text(result, verbose), nl=False)
    sys.exit(result.exit_code)


def _check_validate_arguments(original: str, script_args: tuple[str, ...], script: str | None) -> None:
    """Exit 2 naming the mistake for arguments that cannot go together."""
    if script_args and not script:
        _fail(f"unexpected arguments {' '.join(script_args)!r} (script arguments need --script)")
    if os.path.isfile(original) and original.endswith(".py"):
        folder, name = os.path.split(original)
        _fail(f"{original}: ORIGINAL is the folder of the original program, not a file; to validate one "
              f"script, name its folder and the script: migrate validate {folder or '.'} --script {name}")


def _show_validation(result: ValidationResult, output: str | None, markdown: str | None, fmt: str,
                     verbose: bool, csv_file: str | None = None) -> None:
    """The result written to the files asked for, and printed in the chosen format."""
    import json

    from migrator.reporters import validation_csv

    doc = result.to_json()
    if output:
        write_output(json.dumps(doc, indent=1) + "\n", output)
    if markdown:
        write_output(result.markdown(), markdown)
    if csv_file:
        write_output(validation_csv.render(result), csv_file)
    if fmt == "csv":
        write_output(validation_csv.render(result), None)
    elif fmt == "json":
        click.echo(json.dumps(doc, indent=1))
    elif fmt == "md":
        click.echo(result.markdown(), nl=False)
    else:
        click.echo(result.text(verbose=verbose), nl=False)


def _measure(name: str, tree: str | None) -> None:
    """`plan --measure NAME [TREE]`: the profile goes into the project's pyproject.toml (TREE's, or the cwd's)."""
    from pathlib import Path

    from migrator.ground.config import find_root
    from migrator.plan.clusters import ClusterError
    from migrator.plan.measure import measure

    root = find_root([Path(tree) if tree else Path.cwd()])
    click.echo(f"[plan] measuring this machine for [tool.migrate.clusters.{name}] ...", err=True)
    try:
        path, lines = measure(root, name)
    except (ClusterError, OSError) as exc:
        _fail(str(exc))
    click.echo("\n".join(lines))
    click.echo(f"wrote [tool.migrate.clusters.{name}] to {path}; plan with: migrate plan MODEL --cluster {name}")


def _calibrate(model: str | None, runs: tuple[str, ...], logs: tuple[str, ...], clusters: tuple[str, ...],
               layout: str | None, dtype: str, assume: tuple[str, ...], entry: str | None) -> None:
    """`plan --calibrate RUN.json` / `--calibrate-log FILE`: before and after, then where it was written."""
    from migrator import api

    context = click.get_current_context()
    given = [name for name in ("global_batch", "seq")
             if context.get_parameter_source(name) is not click.core.ParameterSource.DEFAULT]
    if logs and not (layout and len(given) == 2):
        _fail(f"--calibrate-log {logs[0]}: a log does not state its run: give --layout (the layout it ran), "
              "--global-batch and --seq")
    path, result = api.calibrate_plan(model, runs, logs, clusters=clusters, layout=layout, dtype=dtype, assume=assume,
                                      entry=entry, global_batch=context.params["global_batch"],
                                      seq=context.params["seq"])
    click.echo("\n".join(result.lines()))
    click.echo(f"wrote [tool.migrate.clusters.{result.cluster}] to {path}; plan with: migrate plan MODEL --cluster "
               f"{result.cluster} (--explain shows the calibration)")


def _compare_msprobe(target: str | None, golden: str | None, cross_device: bool, output: str | None, fmt: str,
                     verbose: bool) -> None:
    from migrator.api import programs as api_programs
    from migrator.reporters.msprobe_text import comparison_json, comparison_text

    if not (target and golden):
        _fail("--msprobe-target and --msprobe-golden go together")
    result = api_programs.compare_msprobe(target, golden, cross_device=cross_device)
    if output:
        write_output(comparison_json(result), output)
    click.echo(comparison_json(result) if fmt == "json" else comparison_text(result, verbose), nl=False)
    sys.exit(result.exit_code)


@click.command(name="plan")
@click.argument("model", required=False, type=click.Path(path_type=str))
@click.option("--model", "model_config", type=click.Path(dir_okay=False), help="A HF- or Megatron-style config (JSON, or YAML: a nanotron config) instead of a tree.")
@click.option("--cluster", "clusters", multiple=True, help="Cluster profile (repeatable): a100-dgx, h100-dgx, a2-8x, supernode-384, atlas-950-superpod, atlas-960-superpod, or [tool.migrate.clusters.NAME].")
@click.option("--global-batch", type=click.IntRange(min=1), default=1024, show_default=True, help="Sequences per optimizer step.")
@click.option("--seq", type=click.IntRange(min=1), default=4096, show_default=True, help="Tokens per sequence.")
@click.option("--dtype", type=click.Choice(["bf16", "fp16", "fp8"]), default="bf16", show_default=True, help="Matmul dtype (picks the peak TFLOP/s figure).")
@click.option("--devices", type=click.IntRange(min=1), help="World size [default: the smallest size (powers of two in a machine, then whole machines) that fits and splits --global-batch].")
@click.option("--top", type=click.IntRange(min=1), default=3, show_default=True, help="Layouts to show per cluster.")
@click.option("--failure-rate", type=click.FloatRange(min=0, min_open=True), help="Failures per device-hour [default: 1.97e-5, Llama 3 report].")
@click.option("--checkpoint-seconds", type=click.FloatRange(min=0, min_open=True), help="Checkpoint write time, for the Young/Daly interval.")
@click.option("--entry", help="Protocol object as module[:object] [default: validate.py at the tree root].")
@click.option("--check-s0", is_flag=True, help="Run `migrate validate` S0 (fake process group) on each cluster's best layout.")
@click.option("--write-launch", type=click.Path(file_okay=False), help="Write per-stage torchrun + HCCL launch scripts (1 card, 1 machine, supernode) here.")
@click.option("--script", default="train.py", show_default=True, help="--write-launch: the training script the launchers run.")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True, help="What to print.")
@click.option("-o", "--output", type=click.Path(dir_okay=False), help="Write the plan JSON to FILE.")
@click.option("--layout", help="Evaluate this layout instead of searching: tp=8,pp=35,vpp=3,dp=8,cp=1,ep=1,zero=1,recompute=selective,sp=on,mb=1 (keys left out: 1 / off defaults; dp from --devices).")
@click.option("--assume", "assume", multiple=True, metavar="KEY=VALUE", help="Set a modelling assumption or a cluster figure (repeatable), e.g. attention=eager, dp_overlap=0, schedule=dualpipe, peak_tflops_bf16=300 (flagged user); --explain lists them all.")
@click.option("--explain", is_flag=True, help="List every assumption and cluster figure with its provenance and source; with --layout, also the search's pick and the terms that make it faster.")
@click.option("--strict", is_flag=True, help="Refuse (exit 2) a cluster whose figures are not all measured, calibrated or first-party, listing them.")
@click.option("--measure", metavar="NAME", help="Measure this machine (GEMM per dtype, memory copy, collectives; NPU, CUDA or CPU) and write [tool.migrate.clusters.NAME] into the project's pyproject.toml, every figure flagged measured; then plan with --cluster NAME.")
@click.option("--calibrate", "calibrate", multiple=True, type=click.Path(dir_okay=False), metavar="RUN.json", help="Fit the cluster's efficiencies to measured step times and write them, flagged calibrated, into [tool.migrate.clusters.NAME]: a `migrate validate --bench -o` result or hand records {cluster, model, layout, global_batch, seq_len, step_time_s, source} (repeatable).")
@click.option("--calibrate-log", "calibrate_log", multiple=True, type=click.Path(dir_okay=False), metavar="FILE", help="As --calibrate, from a Megatron / MindSpeed log's 'elapsed time per iteration (ms)' lines (median after the first); give --layout, --global-batch and --seq of its run.")
def plan_command(model: str | None, model_config: str | None, clusters: tuple[str, ...], global_batch: int, seq: int,
                 dtype: str, devices: int | None, top: int, failure_rate: float | None,
                 checkpoint_seconds: float | None, entry: str | None, check_s0: bool, write_launch: str | None,
                 script: str, fmt: str, output: str | None, layout: str | None, assume: tuple[str, ...],
                 explain: bool, strict: bool, measure: str | None, calibrate: tuple[str, ...],
                 calibrate_log: tuple[str, ...]) -> None:
    """Propose parallel layouts (TP / PP / DP / EP, ZeRO, recomputation) for MODEL on each cluster.

    MODEL is a tree with validate.py (read on the meta device in a child process) or use --model CONFIG.json.
    Prints memory per device, communication share by collective and link, bubble, MFU and the fault domain.
    """
    import json

    with _Errors():
        from migrator import api

        if measure:
            _measure(measure, model)
            return
        if calibrate or calibrate_log:
            _calibrate(model or model_config, calibrate, calibrate_log, clusters, layout, dtype, assume, entry)
            return
        if not clusters:
            _fail("give --cluster NAME (or --measure NAME to measure this machine)")
        source = model or model_config
        if source is None or (model and model_config):
            _fail("give either MODEL (a tree) or --model CONFIG.json")
        options = dict(dtype=dtype, devices=devices, top=top, checkpoint_seconds=checkpoint_seconds,
                       layout=layout, assume=assume, explain=explain, strict=strict)
        if failure_rate:
            options["failure_rate"] = failure_rate
        result = api.plan(source, clusters, global_batch=global_batch, seq=seq, entry=entry,
                          check_s0=check_s0, progress=lambda text: click.echo(f"[plan] {text}", err=True),
                          **options)
        doc = result.to_json()
        if output:
            write_output(json.dumps(doc, indent=1) + "\n", output)
        if write_launch:
            from migrator.plan.runner import write_launch as write

            written, skipped = write(result, write_launch, script)
            for line in [f"wrote {path}" for path in written] + skipped:
                click.echo(f"[plan] {line}", err=True)
        click.echo(json.dumps(doc, indent=1) if fmt == "json" else result.text())
        sys.exit(result.exit_code)


@click.command(name="advise")
@click.argument("paths", nargs=-1, type=click.Path(exists=True))
@click.option("--profile", required=True, type=click.Path(exists=True, file_okay=False), help="A torch_npu profile: the *_ascend_pt folder (or its ASCEND_PROFILER_OUTPUT).")
@click.option("--root", type=click.Path(file_okay=False, exists=True), help="Scan root (its .migrate/op-trace.json census is used) [default: the paths' project].")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True)
@click.option("-o", "--output", type=click.Path(dir_okay=False), help="Write the result to FILE.")
@click.option("--no-advisor", is_flag=True, help="Do not run msprof-analyze even where it is installed.")
def advise_command(paths: tuple[str, ...], profile: str, root: str | None, fmt: str, output: str | None,
                   no_advisor: bool) -> None:
    """Check the scan's performance findings against an Ascend profile (confirmed / not seen), and run
    `msprof-analyze advisor all -d PROFILE` where it is installed."""
    with _Errors():
        from migrator import api
        from migrator.reporters.advise import render_json, render_text

        result = api.advise(profile, paths, root=root, run_advisor=not no_advisor)
        write_output(render_json(result) if fmt == "json" else render_text(result), output)
