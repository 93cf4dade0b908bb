"""Command line: parses arguments, calls `migrator.api`, picks a reporter, sets the exit code.

Only click and small modules are imported at start-up, so `--help`, `rules` and `rule` are instant.
"""

from __future__ import annotations

import contextlib
import os
import sys
import tempfile
from pathlib import Path
from typing import NoReturn

import click

from migrator import __version__

FAIL_CHOICES = click.Choice(["error", "warning", "info", "never"])
EXIT_CLEAN, EXIT_FINDINGS, EXIT_ERROR = 0, 1, 2
# the names are repeated from migrator.routes.CHOICES so that --help imports nothing (a test keeps them equal)
ROUTE_CHOICES = ("auto", "none", "mindspeed", "deepspeed", "hf")
ROUTE_OPTION = click.option(
    "--route", type=click.Choice(ROUTE_CHOICES), default=None,
    help="Framework route: findings MindSpeed / DeepSpeed / transformers handle on Ascend are `covered` [default: auto].",
)


def _fail(message: str) -> NoReturn:
    from migrator.safe_text import visible

    click.echo(f"migrate: error: {visible(message)}", err=True)
    sys.exit(EXIT_ERROR)


def write_output(text: str, path: str | None) -> None:
    """Print, or write atomically to a file (parent folders created); never a partial file."""
    if not path or path == "-":
        click.echo(text, nl=False)
        return
    target = Path(path)
    tmp = None
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as fh:
            fh.write(text)
        umask = os.umask(0o022)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)  # mkstemp makes 0600; a report is meant to be shared
        os.replace(tmp, target)
        tmp = None
    except OSError as exc:
        _fail(f"cannot write {path}: {exc.strerror or exc}")
    finally:
        if tmp is not None:  # failed before the rename (also on an encoding error): no temp file left
            with contextlib.suppress(OSError):
                os.unlink(tmp)


def _split_codes(values: tuple[str, ...]) -> tuple[str, ...] | None:
    if not values:
        return None
    from migrator.config import normalise_code

    return tuple(normalise_code(c) for v in values for c in v.split(",") if c.strip())


class _Errors:
    """Turn expected errors into exit 2 with one clear line; unexpected ones into a short report."""

    def __enter__(self):
        return self

    def __exit__(self, kind, exc, tb):
        if isinstance(exc, KeyboardInterrupt):
            click.echo("migrate: interrupted", err=True)
            sys.exit(130)  # 128 + SIGINT, as a shell reports Ctrl-C
        if exc is None or isinstance(exc, (SystemExit, click.exceptions.Exit, click.ClickException)):
            return False
        from migrator.api import ConfigError, UsageError
        from migrator.rules.catalogue import CatalogueError

        if isinstance(exc, (UsageError, ConfigError, CatalogueError, FileNotFoundError)):
            _fail(str(exc))
        if os.environ.get("MIGRATE_DEBUG"):
            return False
        _fail(f"internal error: {exc.__class__.__name__}: {exc} (set MIGRATE_DEBUG=1 for the traceback)")
        return False


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="ascend-migrate")
def main() -> None:
    """Move PyTorch CUDA training code to Ascend NPUs, reviewably."""


@main.command()
@click.argument("paths", nargs=-1, type=click.Path(path_type=str))
@click.option("--format", "fmt", type=click.Choice(["text", "json", "sarif", "github"]), default="text", show_default=True,
              help="sarif: SARIF 2.1.0 for code scanning; github: GitHub Actions annotations.")
@click.option("-o", "--output", type=click.Path(dir_okay=False), help="Write the report to FILE.")
@click.option("--select", multiple=True, help="Only these codes, prefixes or families (comma-separated).")
@click.option("--ignore", multiple=True, help="Skip these codes, prefixes or families.")
@click.option("--fail-on", type=FAIL_CHOICES, help="Lowest severity that makes the exit code 1 [default: warning].")
@click.option("--exit-zero", is_flag=True, help="Exit 0 even when findings remain.")
@click.option("--jobs", "-j", type=click.IntRange(min=0), default=0, help="Worker processes (0 = one per core).")
@click.option("--no-cache", is_flag=True, help="Ignore and do not update the result cache.")
@click.option("--root", type=click.Path(file_okay=False, exists=True), help="Scan root (default: nearest folder with pyproject.toml or .git).")
@click.option("--soc", type=click.Choice(["A2", "A3", "950DT"]), help="Ascend SoC for op coverage [default: A2].")
@click.option("--quiet", "-q", is_flag=True, help="Findings only, no summary.")
@click.option("--baseline", type=click.Path(dir_okay=False), help="Report only findings not recorded in FILE [config: baseline].")
@click.option("--write-baseline", type=click.Path(dir_okay=False), help="Record the current findings in FILE and exit 0.")
@click.option("--torch-npu-version", help="Coverage table to check ops against [default: newest shipped].")
@ROUTE_OPTION
def scan(paths, fmt, output, select, ignore, fail_on, exit_zero, jobs, no_cache, root, soc, quiet, baseline, write_baseline,
         torch_npu_version, route):
    """Find CUDA-only dependencies in PATHS (files or folders; default: the current folder)."""
    with _Errors():
        from migrator import api
        from migrator.reporters import render

        settings, resolved = api.resolve_settings(
            list(paths) or ["."],
            root=root,
            select=_split_codes(select),
            ignore=_split_codes(ignore),
            fail_on=fail_on,
            soc=soc,
            torch_npu_version=torch_npu_version,
            jobs=jobs,
            use_cache=not no_cache,
            route=route,
        )
        progress, finish = _progress_bar()
        try:
            result = api.scan(resolved, settings=settings, progress=progress)
        finally:
            finish()
        if write_baseline:
            write_output(api.baseline_text(result), write_baseline)
            click.echo(f"migrate: baseline of {len(result.findings)} finding(s) written to {write_baseline}", err=True)
            sys.exit(EXIT_CLEAN)
        if baseline or settings.baseline:
            result = api.apply_baseline(result, baseline or settings.baseline)
        color = fmt == "text" and not output and sys.stdout.isatty() and "NO_COLOR" not in os.environ
        from migrator.sources import SourceLines

        text = render(result, fmt, color=color, lines_of=SourceLines(result.summary.root) if fmt in ("sarif", "github") else None)
        if quiet and fmt == "text":
            from migrator.reporters.text import render as render_text

            text = render_text(result, color=color, show_summary=False)
        write_output(text, output)
        if output and fmt == "text" and not quiet:
            pass
        sys.exit(_exit_code(result, settings.fail_on, exit_zero))


def _exit_code(result, fail_on: str, exit_zero: bool) -> int:
    from migrator.model import SEVERITY_RANK

    if exit_zero or fail_on == "never":
        return EXIT_CLEAN
    floor = SEVERITY_RANK[fail_on]
    open_findings = (f for f in result.findings if not (f.route and f.route.absorbs))  # covered by a route
    return EXIT_FINDINGS if any(SEVERITY_RANK[f.severity] >= floor for f in open_findings) else EXIT_CLEAN


def _progress_bar():
    """A progress bar on an interactive terminal for long scans; silent otherwise."""
    if not sys.stderr.isatty() or os.environ.get("CI"):
        return None, lambda: None
    state: dict = {}

    def progress(done: int, total: int) -> None:
        if total < 200:
            return
        if "bar" not in state:
            from rich.progress import Progress

            bar = Progress(transient=True)
            bar.start()
            state["bar"] = bar
            state["task"] = bar.add_task("scanning", total=total)
        state["bar"].update(state["task"], completed=done)

    def finish() -> None:
        if "bar" in state:
            state["bar"].stop()

    return progress, finish


@main.command()
@click.argument("paths", nargs=-1, type=click.Path(path_type=str))
@click.option("--target", type=click.Choice(["npu", "portable"]), default=None, help="npu: explicit torch_npu code [default]; portable: runs on CUDA and Ascend.")
@click.option("--diff", "show_diff", is_flag=True, help="Print a unified diff; write nothing. Exit 1 if a file would change.")
@click.option("--check", is_flag=True, help="Write nothing; exit 1 if a file would change.")
@click.option("--out", "out_dir", type=click.Path(file_okay=False), help="Write a migrated copy of the tree to DIR; the original is untouched.")
@click.option("--exact-only", is_flag=True, help="Apply only exact fixes (pure renames); leave numerics fixes as findings.")
@click.option("--annotate", is_flag=True, help="Mark each site left for a person with `# MIGRATE(CODE): reason`.")
@click.option("--strip-annotations", is_flag=True, help="Remove `# MIGRATE(...)` markers.")
@click.option("--no-record", is_flag=True, help="Do not write .migrate/fix-record.json (e.g. in a pre-commit hook).")
@click.option("--select", multiple=True, help="Only fix these codes, prefixes or families.")
@click.option("--ignore", multiple=True, help="Do not fix these codes, prefixes or families.")
@click.option("--fail-on", type=FAIL_CHOICES, help="Lowest severity of remaining findings that makes the exit code 1.")
@click.option("--root", type=click.Path(file_okay=False, exists=True))
@click.option("--no-cache", is_flag=True)
@click.option("--quiet", "-q", is_flag=True, help="Only the change summary, not the remaining findings.")
@ROUTE_OPTION
def fix(paths, target, show_diff, check, out_dir, exact_only, annotate, strip_annotations, no_record, select, ignore,
        fail_on, root, no_cache, quiet, route):
    """Rewrite CUDA-only code in place (or --out DIR), keeping formatting; writes .migrate/fix-record.json."""
    with _Errors():
        from migrator import api

        settings, resolved = api.resolve_settings(
            list(paths) or ["."], root=root, select=_split_codes(select), ignore=_split_codes(ignore),
            fail_on=fail_on, use_cache=not no_cache, route=route,
        )
        target = target or settings.target
        dry = show_diff or check
        outcome = api.fix(resolved, settings=settings, target=target, exact_only=exact_only, annotate=annotate,
                          strip_annotations=strip_annotations, write=not dry, out_dir=out_dir, record=not no_record)
        from migrator.safe_text import one_line

        for path, error in outcome.errors:
            click.echo(one_line(f"{path}: error: {error}"), err=True)
        changed = outcome.changed_files
        if show_diff:
            click.echo("".join(_safe_diff(c.path, c.diff()) for c in outcome.plan.changes if c.changed), nl=False)
        edits = [e for c in outcome.plan.changes if c.changed for e in c.edits]
        kinds = {k: sum(1 for e in edits if e.fix_kind == k) for k in ("exact", "numerics")}
        verb = "would change" if dry else "changed"
        stream_err = show_diff  # keep stdout a clean diff
        click.echo(
            f"{verb} {len(changed)} file(s): {len(edits)} fix(es) applied "
            f"(exact {kinds['exact']}, numerics {kinds['numerics']} — validate these); "
            f"{len(outcome.remaining.findings)} finding(s) remain",
            err=stream_err,
        )
        if outcome.record is not None:
            click.echo(one_line(f"fix record: {outcome.record}"), err=stream_err)
        if dry:
            sys.exit(EXIT_ERROR if outcome.errors else (EXIT_FINDINGS if changed else EXIT_CLEAN))
        if not quiet and outcome.remaining.findings:
            from migrator.reporters.text import render as render_text

            click.echo(render_text(outcome.remaining, color=sys.stdout.isatty(), show_summary=False), nl=False)
        if outcome.errors:
            sys.exit(EXIT_ERROR)
        sys.exit(_exit_code(outcome.remaining, settings.fail_on, False))


def _safe_diff(path: str, diff: str) -> str:
    """A file's unified diff fit for a terminal: the name on one line in the `---`/`+++` headers,
    control bytes in the body shown as escapes (normal text, LF and CRLF line ends unchanged)."""
    from migrator.safe_text import one_line, visible_block

    head = f"--- a/{path}\n+++ b/{path}\n"
    if diff.startswith(head):
        name = one_line(path)
        return f"--- a/{name}\n+++ b/{name}\n" + visible_block(diff[len(head):])
    return visible_block(diff)


@main.command("ops")
@click.argument("names", nargs=-1)
@click.option("--soc", default="A2", show_default=True, help="A2, A3 or 950DT.")
@click.option("--torch-npu-version", help="Coverage table version [default: newest shipped].")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True)
@click.option("--list", "list_all", is_flag=True, help="List every op in the table (with --status to filter).")
@click.option("--status", type=click.Choice(["supported", "partial", "unverified", "cpu_fallback", "unsupported"]))
@click.option("--trace", "trace_target", type=click.Path(exists=True), help="Op census: run this program (a tree with validate.py, or a script with ARGS after --) and check every op it runs.")
@click.option("--steps", type=click.IntRange(min=1), default=1, show_default=True, help="--trace: training steps to trace.")
@click.option("--fake", is_flag=True, help="--trace: FakeTensor run (shapes only, no memory): full-size configs in seconds.")
@click.option("--entry", help="--trace: protocol object as module[:object] [default: validate.py].")
@click.option("--bf16-policy", type=click.Choice(["amp", "pure", "fp32"]), default="amp", show_default=True, help="--trace, protocol: autocast bf16, model.to(bfloat16), or fp32.")
@click.option("--fail-on", type=FAIL_CHOICES, help="--trace: lowest finding severity that makes the exit code 1 [default: warning].")
@click.option("--root", type=click.Path(file_okay=False, exists=True), help="--trace: scan root that gets .migrate/op-trace.json.")
@click.option("--timeout", type=click.FloatRange(min=1), default=600, show_default=True, help="--trace: seconds for the traced run.")
@click.option("--all", "all_rows", is_flag=True, help="--trace: print every traced op, not only the worst 40.")
def ops(names, soc, torch_npu_version, fmt, list_all, status, trace_target, steps, fake, entry, bf16_policy, fail_on,
        root, timeout, all_rows):
    """Does NAME run on Ascend? Status, dtypes, NPU equivalent and the source of the fact.

    Op census: migrate ops --trace TREE_OR_SCRIPT [--fake] [-- SCRIPT_ARGS]
    """
    with _Errors():
        import json

        from migrator import api
        from migrator.coverage import CoverageError, format_text

        if trace_target:
            _trace_ops(trace_target, names, soc, torch_npu_version, fmt, steps, fake, entry, bf16_policy, fail_on,
                       root, timeout, all_rows)
            return
        if not names and not list_all:
            raise click.UsageError("name one or more APIs (e.g. torch.nn.functional.gelu), or use --list")
        try:
            if list_all:
                entries = api.ops_list(soc=soc, version=torch_npu_version, status=status)
                if fmt == "json":
                    write_output(json.dumps([e.to_dict() for e in entries], indent=2, ensure_ascii=False) + "\n", None)
                else:
                    for e in entries:
                        click.echo(f"{e.name:<60} {e.status:<13} {', '.join(e.dtypes) or '-'}")
                return
            rows = api.ops(names, soc=soc, version=torch_npu_version)
        except CoverageError as exc:
            _fail(str(exc))
        if fmt == "json":
            write_output(json.dumps(rows, indent=2, ensure_ascii=False) + "\n", None)
        else:
            click.echo(format_text(rows), nl=False)


def _trace_ops(target, script_args, soc, torch_npu_version, fmt, steps, fake, entry, bf16_policy, fail_on, root,
               timeout, all_rows) -> None:
    import json

    from migrator import api
    from migrator.model import SEVERITY_RANK
    from migrator.reporters.census import render as render_census

    census, path, settings = api.trace_ops(target, root=root, soc=soc, torch_npu_version=torch_npu_version,
                                           script_args=tuple(script_args), steps=steps, fake=fake, entry=entry,
                                           bf16_policy=bf16_policy, timeout=timeout)
    if fmt == "json":
        write_output(json.dumps(census.to_json(), indent=1, ensure_ascii=False) + "\n", None)
    else:
        click.echo(render_census(census, str(path) if path else None, None if all_rows else 40), nl=False)
    floor = fail_on or settings.fail_on
    if floor != "never" and any(SEVERITY_RANK[o.severity] >= SEVERITY_RANK[floor] for o in census.findings):
        sys.exit(EXIT_FINDINGS)


@main.command()
@click.argument("paths", nargs=-1, type=click.Path(path_type=str))
@click.option("-o", "--output", type=click.Path(dir_okay=False), help="Write the report to FILE (.html or .md); without it, print (needs --format).")
@click.option("--format", "fmt", type=click.Choice(["html", "md"]), help="html (self-contained page) or md (GitHub PR comment) [default: from the -o extension].")
@click.option("--fix-record", type=click.Path(dir_okay=False), help="Edits applied by `migrate fix` [default: .migrate/fix-record.json in the scan root, when present].")
@click.option("--validation", type=click.Path(dir_okay=False), help="Validation result JSON (migrator/schema/validation.schema.json).")
@click.option("--plan", "plan_file", type=click.Path(dir_okay=False), help="Parallel plan JSON from `migrate plan -o` (migrator/schema/plan.schema.json).")
@click.option("--diffs", "proposed_diffs", is_flag=True, help="Show, per file, the diff `migrate fix` would apply.")
@click.option("--select", multiple=True, help="Only these codes, prefixes or families (comma-separated).")
@click.option("--ignore", multiple=True, help="Skip these codes, prefixes or families.")
@click.option("--target", type=click.Choice(["npu", "portable"]), help="Migration target [default: npu].")
@click.option("--soc", type=click.Choice(["A2", "A3", "950DT"]), help="Ascend SoC for op coverage [default: A2].")
@click.option("--root", type=click.Path(file_okay=False, exists=True), help="Scan root (default: nearest folder with pyproject.toml or .git).")
@click.option("--no-cache", is_flag=True, help="Ignore and do not update the result cache.")
@ROUTE_OPTION
def report(paths, output, fmt, fix_record, validation, plan_file, proposed_diffs, select, ignore, target, soc, root,
           no_cache, route):
    """Write a reviewer report for PATHS: one self-contained HTML page, or Markdown for a PR comment."""
    with _Errors():
        from migrator.reporters.report import format_for

        fmt = format_for(output, fmt)
        if fmt is None:
            hint = f" ({output} has neither extension)" if output and output != "-" else ""
            _fail(f"choose the report format: -o FILE.html, -o FILE.md or --format html|md{hint}")
        from migrator import api
        from migrator.reporters.report import render as render_report

        settings, resolved = api.resolve_settings(
            list(paths) or ["."], root=root, select=_split_codes(select), ignore=_split_codes(ignore),
            target=target, soc=soc, use_cache=not no_cache, route=route,
        )
        progress, finish = _progress_bar()
        try:
            data = api.report(resolved, settings=settings, fix_record=fix_record, validation=validation,
                              proposed_diffs=proposed_diffs, progress=progress, plan=plan_file)
        finally:
            finish()
        write_output(render_report(data, fmt), output)
        if output and output != "-" and sys.stderr.isatty():
            click.echo(f"report written to {output}", err=True)


@main.command("rules")
@click.option("--format", "fmt", type=click.Choice(["text", "json", "md"]), default="text", show_default=True)
@click.option("-o", "--output", type=click.Path(dir_okay=False))
def list_rules(fmt, output):
    """List the rule catalogue."""
    with _Errors():
        from migrator import api
        from migrator.rules import docs

        rules = api.rules()
        render = {"text": docs.catalogue_text, "json": docs.catalogue_json, "md": docs.catalogue_markdown}[fmt]
        write_output(render(rules), output)


@main.command("rule")
@click.argument("code")
def show_rule(code):
    """Explain one rule (or a framework route: mindspeed, deepspeed, hf): what it finds, why, the fix, sources."""
    with _Errors():
        from migrator import api
        from migrator.rules.docs import rule_markdown

        if code.lower() in ROUTE_CHOICES[2:]:  # a framework route: `migrate rule mindspeed`
            from migrator.routes.docs import route_markdown

            click.echo(route_markdown(code.lower()), nl=False)
            return
        click.echo(rule_markdown(api.explain(code), heading="#"), nl=False)


def _int_list(text: str | None, name: str) -> tuple[int, ...] | None:
    if text is None:
        return None
    try:
        return tuple(int(x) for x in text.split(",") if x.strip())
    except ValueError:
        _fail(f"{name}: expected comma-separated integers, got {text!r}")


@main.command(context_settings={"allow_interspersed_args": True})
@click.argument("original", type=click.Path(path_type=str))
@click.argument("script_args", nargs=-1, type=click.UNPROCESSED)
@click.option("--migrated", type=click.Path(file_okay=False), help="The migrated tree [default: `migrate fix --target npu` into a temp dir].")
@click.option("--stages", default="S0,S1,S2,S3", show_default=True, help="Stages to run (comma-separated): S0 plan, S1 parity-1card, S2 parity-dp, S3 parity-mp.")
@click.option("--force", is_flag=True, help="Run later stages even after a stage fails.")
@click.option("--entry", help="Protocol object as module[:object] [default: validate.py at the tree root].")
@click.option("--script", help="Script mode: run this unmodified training script (ARGS after --) on both sides.")
@click.option("--curve-steps", type=click.IntRange(min=1), default=5, show_default=True, help="Script mode: steps of the loss curve (a smoke check, not a gate).")
@click.option("--seed", type=int, default=0, show_default=True, help="Seed for weights, data order and every RNG.")
@click.option("--steps", help="S1 batches, e.g. 0,1 [default: 0,1].")
@click.option("--nproc-per-node", "--world-size", "nproc", type=click.IntRange(min=1), default=2, show_default=True, help="S2/S3 ranks per node.")
@click.option("--nnodes", type=click.IntRange(min=1), default=1, show_default=True, help="S2/S3 nodes (a real cluster; with --rdzv-endpoint).")
@click.option("--rdzv-endpoint", help="torchrun rendezvous HOST:PORT for --nnodes > 1.")
@click.option("--plan-world-size", type=click.IntRange(min=1), default=8, show_default=True, help="S0: the real target world size (8, 64, 384, ...).")
@click.option("--plan-tp", type=click.IntRange(min=1), help="S0: tensor-parallel degree [default: 2 when the program declares tp].")
@click.option("--bf16-policy", type=click.Choice(["amp", "pure"]), default="amp", show_default=True, help="amp: autocast over fp32 master weights; pure: model.to(bfloat16).")
@click.option("--threads", type=click.IntRange(min=1), default=1, show_default=True, help="Threads per child process (fixed for determinism).")
@click.option("--timeout", type=click.FloatRange(min=1), default=600, show_default=True, help="Seconds per child process.")
@click.option("--work-dir", type=click.Path(file_okay=False), help="Keep dumps (safetensors + dump.json) here.")
@click.option("--record", type=click.Path(), help="Run the reference side only and save it (dir, or .tar/.tar.gz).")
@click.option("--compare", type=click.Path(), help="Validate the migrated side against a --record'ed reference.")
@click.option("--export-msprobe", type=click.Path(file_okay=False), help="Also write msprobe's layout (step<k>/rank<r>/dump_tensor_data/*.pt).")
@click.option("--max-dump-mb", type=click.IntRange(min=0), default=1024, show_default=True, help="Full tensors per recorded run; statistics only beyond.")
@click.option("-o", "--output", type=click.Path(dir_okay=False), help="Write the result JSON (validation.schema.json) to FILE.")
@click.option("--markdown", type=click.Path(dir_okay=False), help="Write the Markdown summary to FILE.")
@click.option("--format", "fmt", type=click.Choice(["text", "json", "md"]), default="text", show_default=True, help="What to print.")
@click.option("--quiet", "-q", is_flag=True, help="No progress lines.")
@click.option("--verbose", "-v", is_flag=True, help="Every check with its metric, value and threshold, passing ones too.")
@click.option("--bench", is_flag=True, help="Stage benchmarks: step time, tokens/s, TFLOP/s, MFU, communication share, crash rate.")
@click.option("--bench-steps", type=click.IntRange(min=1), default=5, show_default=True, help="--bench: timed steps per repeat (after 2 warm-up steps).")
@click.option("--repeats", type=click.IntRange(min=1), default=2, show_default=True, help="--bench: repeats per stage and side (crash / hang / NaN rate).")
@click.option("--peak-tflops", type=click.FloatRange(min=0, min_open=True), help="--bench: device peak TFLOP/s for MFU [default: the sourced table].")
@click.option("--bench-timeout", type=click.FloatRange(min=1), default=300, show_default=True, help="--bench: seconds per repeat before it counts as a hang.")
def validate(original, script_args, migrated, stages, force, entry, script, curve_steps, seed, steps, nproc, nnodes,
             rdzv_endpoint, plan_world_size, plan_tp, bf16_policy, threads, timeout, work_dir, record, compare,
             export_msprobe, max_dump_mb, output, markdown, fmt, quiet, verbose, bench, bench_steps, repeats,
             peak_tflops, bench_timeout):
    """Staged BF16 diff validation of a migrated program against ORIGINAL.

    Exit codes: 0 every run stage passes or warns, 1 a stage fails, 2 the validation could not run.
    Script mode: migrate validate ORIGINAL --script train.py -- ARGS
    """
    import json

    with _Errors():
        from migrator import api

        if script_args and not script:
            _fail(f"unexpected arguments {' '.join(script_args)!r} (script arguments need --script)")
        if nnodes > 1 and not rdzv_endpoint:
            _fail("--nnodes > 1 needs --rdzv-endpoint HOST:PORT")
        chosen = tuple(s.strip().upper() for s in stages.split(",") if s.strip())
        if chosen == ("ALL",):
            chosen = ("S0", "S1", "S2", "S3")
        options = dict(migrated=migrated, stages=chosen, force=force, entry=entry, seed=seed,
                       world_size=nproc, nnodes=nnodes, rdzv_endpoint=rdzv_endpoint, plan_world_size=plan_world_size,
                       plan_tp=plan_tp, bf16_policy=bf16_policy, threads=threads, timeout=timeout, work_dir=work_dir,
                       record=record, compare=compare, export_msprobe=export_msprobe, script=script,
                       script_args=tuple(script_args), curve_steps=curve_steps, max_bytes=max_dump_mb << 20)
        if bench:
            options.update(bench=True, bench_steps=bench_steps, repeats=repeats, peak_tflops=peak_tflops,
                           bench_timeout=bench_timeout)
        parsed = _int_list(steps, "--steps")
        if parsed:
            options["steps"] = parsed

        def progress(text: str) -> None:
            if not quiet:
                click.echo(f"[validate] {text}", err=True)

        result = api.validate(original, progress=progress, **options)
        doc = result.to_json()
        if output:
            write_output(json.dumps(doc, indent=1) + "\n", output)
        if markdown:
            write_output(result.markdown(), markdown)
        if fmt == "json":
            click.echo(json.dumps(doc, indent=1))
        elif fmt == "md":
            click.echo(result.markdown(), nl=False)
        else:
            click.echo(result.text(verbose=verbose), nl=False)
        sys.exit(result.exit_code)


@main.command(name="plan")
@click.argument("model", required=False, type=click.Path(path_type=str))
@click.option("--model", "model_config", type=click.Path(dir_okay=False), help="A HF- or Megatron-style config JSON instead of a tree.")
@click.option("--cluster", "clusters", multiple=True, required=True, help="Cluster profile (repeatable): a100-dgx, h100-dgx, a2-8x, supernode-384, atlas-950-superpod, atlas-960-superpod, or [tool.migrate.clusters.NAME].")
@click.option("--global-batch", type=click.IntRange(min=1), default=1024, show_default=True, help="Sequences per optimizer step.")
@click.option("--seq", type=click.IntRange(min=1), default=4096, show_default=True, help="Tokens per sequence.")
@click.option("--dtype", type=click.Choice(["bf16", "fp16", "fp8"]), default="bf16", show_default=True, help="Matmul dtype (picks the peak TFLOP/s figure).")
@click.option("--devices", type=click.IntRange(min=1), help="World size [default: the profile's devices].")
@click.option("--top", type=click.IntRange(min=1), default=3, show_default=True, help="Layouts to show per cluster.")
@click.option("--failure-rate", type=click.FloatRange(min=0, min_open=True), help="Failures per device-hour [default: 1.97e-5, Llama 3 report].")
@click.option("--checkpoint-seconds", type=click.FloatRange(min=0, min_open=True), help="Checkpoint write time, for the Young/Daly interval.")
@click.option("--entry", help="Protocol object as module[:object] [default: validate.py at the tree root].")
@click.option("--check-s0", is_flag=True, help="Run `migrate validate` S0 (fake process group) on each cluster's best layout.")
@click.option("--write-launch", type=click.Path(file_okay=False), help="Write per-stage torchrun + HCCL launch scripts (1 card, 1 machine, supernode) here.")
@click.option("--script", default="train.py", show_default=True, help="--write-launch: the training script the launchers run.")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True, help="What to print.")
@click.option("-o", "--output", type=click.Path(dir_okay=False), help="Write the plan JSON to FILE.")
def plan_command(model, model_config, clusters, global_batch, seq, dtype, devices, top, failure_rate,
                 checkpoint_seconds, entry, check_s0, write_launch, script, fmt, output):
    """Propose parallel layouts (TP / PP / DP / EP, ZeRO, recomputation) for MODEL on each cluster.

    MODEL is a tree with validate.py (read on the meta device in a child process) or use --model CONFIG.json.
    Prints memory per device, communication share by collective and link, bubble, MFU and the fault domain.
    """
    import json

    with _Errors():
        from migrator import api

        if bool(model) == bool(model_config):
            _fail("give either MODEL (a tree) or --model CONFIG.json")
        options = dict(dtype=dtype, devices=devices, top=top, checkpoint_seconds=checkpoint_seconds)
        if failure_rate:
            options["failure_rate"] = failure_rate
        result = api.plan(model or model_config, clusters, global_batch=global_batch, seq=seq, entry=entry,
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


@main.group("cache")
def cache_group() -> None:
    """The scan cache (per-file results keyed by content; old entries are pruned on their own)."""


@cache_group.command("clean")
def cache_clean() -> None:
    """Delete every cached scan result."""
    with _Errors():
        from migrator import api

        folder, files, size = api.cache_clean()
        click.echo(f"removed {files} cache file(s), {size} bytes, from {folder}")


if __name__ == "__main__":  # pragma: no cover
    main()
