"""Command line: parses arguments, calls `migrator.api`, picks a reporter, sets the exit code.

Only click and small modules are imported at start-up, so `--help`, `rules` and `rule` are instant.
"""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING

from migrator.ground import interrupt

if interrupt.entry_process():  # the `migrate` script: before click and the rest load (python -m: __main__.py)
    interrupt.install()

import click  # noqa: E402

from migrator import __version__
from migrator.cli.programs import advise_command, plan_command, validate
from migrator.cli.support import (
    CLEAN_ENV_HELP,
    EXIT_CLEAN,
    EXIT_ERROR,
    EXIT_FINDINGS,
    FAIL_CHOICES,
    ROUTE_CHOICES,
    ROUTE_OPTION,
    ProgressDisplay,
    _Errors,
    _fail,
    _split_codes,
    child_environment,
    write_output,
)
from migrator.reporters import FORMATS, READS_SOURCES

if TYPE_CHECKING:  # types only: the api and the fixer are imported when a command runs
    from pathlib import Path

    from migrator.api import FixOutcome
    from migrator.fix.runner import Edit, FileChange
    from migrator.ground.model import RunResult


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="ascend-migrate")
def main() -> None:
    """Move PyTorch CUDA training code to Ascend NPUs, reviewably."""
    from migrator.ground import dataclass_code

    # before the command imports what it needs: most of those classes' code is kept
    dataclass_code.install(click.get_current_context().invoked_subcommand or "")


@main.command()
@click.argument("paths", nargs=-1, type=click.Path(path_type=str))
@click.option("--format", "fmt", type=click.Choice(list(FORMATS)), default="text", show_default=True,
              help="sarif: SARIF 2.1.0 for code scanning; github: GitHub Actions annotations; gitlab: GitLab Code "
                   "Quality; junit: JUnit XML (a failing test per finding); csv: one row per finding; csv-ops: one "
                   "row per op the code calls (status, dtypes, coverage table, sites).")
@click.option("-o", "--output", type=click.Path(dir_okay=False), help="Write the report to FILE.")
@click.option("--select", multiple=True, help="Only these codes, prefixes or families (comma-separated).")
@click.option("--ignore", multiple=True, help="Skip these codes, prefixes or families.")
@click.option("--fail-on", type=FAIL_CHOICES, help="Lowest severity that makes the exit code 1 [default: warning].")
@click.option("--exit-zero", is_flag=True, help="Exit 0 even when findings remain.")
@click.option("--jobs", "-j", type=click.IntRange(min=0), default=0, help="Worker processes (0 = one per core).")
@click.option("--no-cache", is_flag=True, help="Ignore and do not update the result cache.")
@click.option("--root", type=click.Path(file_okay=False, exists=True), help="Scan root (default: nearest folder with pyproject.toml or .git).")
@click.option("--soc", type=click.Choice(["A2", "A3", "950DT"]), help="Ascend SoC for op coverage [default: A2].")
@click.option("--quiet", "-q", is_flag=True, help="Findings only: no summary, no progress display.")
@click.option("--baseline", type=click.Path(dir_okay=False), help="Report only findings not recorded in FILE [config: baseline].")
@click.option("--write-baseline", type=click.Path(dir_okay=False), help="Record the current findings in FILE and exit 0.")
@click.option("--torch-npu-version", help="Coverage table to check ops against [default: newest shipped].")
@click.option("--include-info", is_flag=True, help="sarif, github, gitlab, junit: also emit info-level notes (default: warnings and errors).")
@click.option("--show-source", is_flag=True, help="text: print the source line under each finding.")
@click.option("--statistics", is_flag=True, help="Print one line per code with its count instead of the findings.")
@click.option("--force", is_flag=True, help="Write -o / --write-baseline even onto a scanned file or inside .migrate/.")
@click.option("--add-noqa", is_flag=True, help="Append `# noqa: CODE` to the line of every finding (merged into a noqa there) and exit 0.")
@ROUTE_OPTION
def scan(paths: tuple[str, ...], fmt: str, output: str | None, select: tuple[str, ...], ignore: tuple[str, ...],
         fail_on: str | None, exit_zero: bool, jobs: int, no_cache: bool, root: str | None, soc: str | None, quiet: bool,
         baseline: str | None, write_baseline: str | None, torch_npu_version: str | None, include_info: bool,
         show_source: bool, statistics: bool, force: bool, add_noqa: bool, route: str | None) -> None:
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
        if not force:
            _refuse_overwriting_inputs((output, write_baseline), settings.root, resolved)
        with ProgressDisplay(quiet) as progress:
            result = api.scan(resolved, settings=settings, progress=progress)
        if result.summary.files_scanned == 0:
            asked = ", ".join(list(paths) or ["."])
            click.echo(f"migrate: warning: no files to scan in {asked}" + (
                "".join(f"\n  {s.path}: skipped: {s.reason}" for s in result.skipped[:5]) if result.skipped else
                " (no Python, notebook, shell, config or requirements file found)"), err=True)
            sys.exit(EXIT_ERROR)
        if write_baseline:
            write_output(api.baseline_text(result), write_baseline)
            click.echo(f"migrate: baseline of {len(result.findings)} finding(s) written to {write_baseline}", err=True)
            sys.exit(EXIT_CLEAN)
        baseline_file = baseline or settings.baseline
        if baseline_file:
            result = api.apply_baseline(result, baseline_file)
        if add_noqa:
            added = api.add_noqa(result)
            click.echo(f"migrate: added {added.comments} noqa comment(s) in {len(added.files)} file(s)")
            click.echo("".join(f"  note: {note}\n" for note in added.notes), nl=False)
            sys.exit(EXIT_CLEAN)
        color = fmt == "text" and not output and sys.stdout.isatty() and "NO_COLOR" not in os.environ
        from migrator.engine.scanned_lines import SourceLines

        text = render(result, fmt, color=color, lines_of=SourceLines(result.summary.root) if fmt in READS_SOURCES else None,
                      include_info=include_info)
        if fmt == "text" and (quiet or show_source or statistics):
            from migrator.reporters import text as text_reporter

            text = (text_reporter.statistics(result, color=color) if statistics else text_reporter.render(
                result, color=color, show_summary=not quiet, lines_of=SourceLines(result.summary.root) if show_source else None))
        write_output(text, output)
        sys.exit(_exit_code(result, settings.fail_on, exit_zero))


def _refuse_overwriting_inputs(outputs: tuple[str | None, ...], root: Path, inputs: list[Path]) -> None:
    from migrator.cli.output_guard import refused_output

    for output in outputs:
        why = refused_output(output, root, inputs)
        if why:
            _fail(why)


def _exit_code(result: RunResult, fail_on: str, exit_zero: bool) -> int:
    from migrator.ground.model import SEVERITY_RANK, is_advice

    if exit_zero or fail_on == "never":
        return EXIT_CLEAN
    floor = SEVERITY_RANK[fail_on]
    open_findings = (f for f in result.findings  # covered by a route, or advice on speed: not work that blocks
                     if not (f.route and f.route.absorbs) and not is_advice(f))
    return EXIT_FINDINGS if any(SEVERITY_RANK[f.severity] >= floor for f in open_findings) else EXIT_CLEAN


@main.command()
@click.argument("paths", nargs=-1, type=click.Path(path_type=str))
@click.option("--target", type=click.Choice(["npu", "portable"]), default=None, help="npu: explicit torch_npu code [default]; portable: runs on CUDA and Ascend.")
@click.option("--diff", "show_diff", is_flag=True, help="Print a unified diff; write nothing. Exit 1 if a file would change.")
@click.option("--check", is_flag=True, help="Write nothing; exit 1 if a file would change.")
@click.option("--out", "out_dir", type=click.Path(file_okay=False), help="Write a migrated copy of the tree to DIR; the original is untouched.")
@click.option("--exact-only", is_flag=True, help="Apply only exact fixes (pure renames); leave numerics fixes as findings (the pre-commit hook's default).")
@click.option("--numerics", "with_numerics", is_flag=True, help="Also apply numerics fixes, even after --exact-only (opt-in for the pre-commit hook).")
@click.option("--annotate", is_flag=True, help="Mark each site left for a person with `# MIGRATE(CODE): reason`.")
@click.option("--strip-annotations", is_flag=True, help="Remove `# MIGRATE(...)` markers.")
@click.option("--fuse", is_flag=True, help="Also rewrite FUS sites to their fused torch_npu op, the original kept as the non-NPU branch; check with `migrate validate`.")
@click.option("--no-record", is_flag=True, help="Do not write .migrate/fix-record.json (e.g. in a pre-commit hook).")
@click.option("--select", multiple=True, help="Only fix these codes, prefixes or families.")
@click.option("--ignore", multiple=True, help="Do not fix these codes, prefixes or families.")
@click.option("--fail-on", type=FAIL_CHOICES, help="Lowest severity of remaining findings that makes the exit code 1.")
@click.option("--root", type=click.Path(file_okay=False, exists=True))
@click.option("--no-cache", is_flag=True)
@click.option("--quiet", "-q", is_flag=True, help="Only the change summary: not the remaining findings, no progress display.")
@ROUTE_OPTION
def fix(paths: tuple[str, ...], target: str | None, show_diff: bool, check: bool, out_dir: str | None, exact_only: bool,
        with_numerics: bool, annotate: bool, strip_annotations: bool, fuse: bool, no_record: bool, select: tuple[str, ...],
        ignore: tuple[str, ...], fail_on: str | None, root: str | None, no_cache: bool, quiet: bool,
        route: str | None) -> None:
    """Rewrite CUDA-only code in place (or --out DIR), keeping formatting; writes .migrate/fix-record.json."""
    with _Errors():
        from migrator import api

        settings, resolved = api.resolve_settings(
            list(paths) or ["."], root=root, select=_split_codes(select), ignore=_split_codes(ignore),
            fail_on=fail_on, use_cache=not no_cache, route=route,
        )
        target = target or settings.target
        exact_only = exact_only and not with_numerics
        dry = show_diff or check
        with ProgressDisplay(quiet) as progress:
            outcome = api.fix(resolved, settings=settings, target=target, exact_only=exact_only, annotate=annotate,
                              strip_annotations=strip_annotations, fuse=fuse, write=not dry, out_dir=out_dir,
                              record=not no_record, progress=progress)
        from migrator.ground.safe_text import one_line

        for path, error in outcome.errors:
            click.echo(one_line(f"{path}: error: {error}"), err=True)
        changed = outcome.changed_files
        if show_diff:  # one file's diff at a time: the plan keeps the texts out of memory (fix/spool.py)
            for c in outcome.plan.changes:
                if c.changed:
                    click.echo(_validate_marks(c) + _safe_diff(c.path, c.diff()), nl=False)
        edits = [e for c in outcome.plan.changes if c.changed for e in c.edits]
        click.echo(_fix_summary(outcome, edits, dry, listed=not dry and not quiet), err=show_diff)  # stdout: a clean diff
        if outcome.record is not None:
            click.echo(one_line(f"fix record: {outcome.record}"), err=show_diff)
        for note in outcome.plan.notes if changed and not quiet else ():
            click.echo(one_line(f"note: {note}"), err=show_diff)
        if dry:
            sys.exit(EXIT_ERROR if outcome.errors else (EXIT_FINDINGS if changed else EXIT_CLEAN))
        if not quiet and outcome.remaining.findings:
            from migrator.reporters.text import render as render_text

            click.echo(render_text(outcome.remaining, color=sys.stdout.isatty(), show_summary=False), nl=False)
        if outcome.errors:
            sys.exit(EXIT_ERROR)
        sys.exit(_exit_code(outcome.remaining, settings.fail_on, False))


def _fix_summary(outcome: FixOutcome, edits: list[Edit], dry: bool, listed: bool) -> str:
    """`changed 2 file(s): 5 fix(es) applied (...); 43 finding(s) remain (8 listed below, ...)`; a dry run
    (--diff, --check) says what it *would* do."""
    from migrator.reporters.text import listed as listed_count

    kinds = {k: sum(1 for e in edits if e.fix_kind == k) for k in ("exact", "numerics")}
    files = len(outcome.changed_files)
    remaining = outcome.remaining.findings
    head = (f"would change {files} file(s): would apply {len(edits)} fix(es)" if dry
            else f"changed {files} file(s): {len(edits)} fix(es) applied")
    tail = f"{len(remaining)} finding(s) {'would remain' if dry else 'remain'}"
    if listed and remaining:
        shown = listed_count(outcome.remaining)
        tail += (" (all listed below)" if shown == len(remaining)
                 else f" ({shown} listed below, {len(remaining) - shown} info-level notes summarised)")
    return f"{head} (exact {kinds['exact']}, numerics {kinds['numerics']} — validate these); {tail}"


def _validate_marks(change: FileChange) -> str:
    """`# validate this: ...` lines above a file's diff, one per numerics fix (patch and git apply skip
    text before a diff header)."""
    from migrator.ground.safe_text import one_line

    return "".join(
        one_line(f"# validate this (numerics fix): {change.path}:{e.line} {e.code} {e.title}") + "\n"
        for e in change.edits if e.fix_kind == "numerics"
    )


def _safe_diff(path: str, diff: str) -> str:
    """A file's unified diff fit for a terminal: the name on one line in the `---`/`+++` headers,
    control bytes in the body shown as escapes (normal text, LF and CRLF line ends unchanged)."""
    from migrator.ground.safe_text import one_line, visible_block

    head = f"--- a/{path}\n+++ b/{path}\n"
    if diff.startswith(head):
        name = one_line(path)
        return f"--- a/{name}\n+++ b/{name}\n" + visible_block(diff[len(head):])
    return visible_block(diff)


@main.command("ops")
@click.argument("names", nargs=-1)
@click.option("--soc", default="A2", show_default=True, help="A2, A3 or 950DT.")
@click.option("--torch-npu-version", help="Coverage table version [default: newest shipped].")
@click.option("--format", "fmt", type=click.Choice(["text", "json", "csv"]), default="text", show_default=True, help="csv: one row per op (status, dtypes, coverage table, source; --trace: uses and sites).")
@click.option("--list", "list_all", is_flag=True, help="List every op in the table (with --status to filter).")
@click.option("--status", type=click.Choice(["supported", "partial", "unverified", "cpu_fallback", "unsupported"]))
@click.option("--trace", "trace_target", type=click.Path(exists=True), help="Op census: run this program (a tree with validate.py, or a script with ARGS after --) and check every op it runs.")
@click.option("--steps", type=click.IntRange(min=1), default=1, show_default=True, help="--trace: training steps to trace (2+ also compares shapes between steps).")
@click.option("--cann-version", help="--trace: CANN version of the advisor's AICPU rules [default: config, else the newest in the data].")
@click.option("--fake", is_flag=True, help="--trace: FakeTensor run (shapes only, no memory): full-size configs in seconds.")
@click.option("--entry", help="--trace: protocol object as module[:object] [default: validate.py].")
@click.option("--bf16-policy", type=click.Choice(["amp", "pure", "fp32"]), default="amp", show_default=True, help="--trace, protocol: autocast bf16, model.to(bfloat16), or fp32.")
@click.option("--fail-on", type=FAIL_CHOICES, help="--trace: lowest finding severity that makes the exit code 1 [default: warning].")
@click.option("--root", type=click.Path(file_okay=False, exists=True), help="--trace: scan root that gets .migrate/op-trace.json.")
@click.option("--timeout", type=click.FloatRange(min=1), default=600, show_default=True, help="--trace: seconds for the traced run.")
@click.option("--all", "all_rows", is_flag=True, help="--trace: print every traced op, not only the worst 40.")
@click.option("--quiet", "-q", is_flag=True, help="--trace: no progress display.")
@click.option("-o", "--output", type=click.Path(dir_okay=False), help="Also write the JSON (--trace: the census; else the lookups) to FILE.")
@click.option("--clean-env", is_flag=True, help="--trace: " + CLEAN_ENV_HELP)
@click.option("--env", "env_names", multiple=True, metavar="NAME", help="--trace --clean-env: also pass this variable. Repeatable.")
def ops(names: tuple[str, ...], soc: str, torch_npu_version: str | None, fmt: str, list_all: bool, status: str | None,
        trace_target: str | None, steps: int, cann_version: str | None, fake: bool, entry: str | None, bf16_policy: str, fail_on: str | None,
        root: str | None, timeout: float, all_rows: bool, quiet: bool, output: str | None, clean_env: bool,
        env_names: tuple[str, ...]) -> None:
    """Does NAME run on Ascend? Status, dtypes, NPU equivalent and the source of the fact.

    Op census: migrate ops --trace TREE_OR_SCRIPT [--fake] [-- SCRIPT_ARGS]

    --trace runs the program with your rights, not in a sandbox: it can read and write your files and
    reach the network. --clean-env keeps tokens and keys in the environment away from it.
    """
    with _Errors():
        import json

        from migrator import api
        from migrator.catalogue.coverage import CoverageError, format_text
        from migrator.reporters.ops_csv import render_lookups

        as_text = {"csv": render_lookups, "json": lambda rows: json.dumps(rows, indent=2, ensure_ascii=False) + "\n"}

        if trace_target:
            with child_environment(clean_env, env_names):
                _trace_ops(trace_target, names, soc, torch_npu_version, fmt, steps, fake, entry, bf16_policy, fail_on,
                           root, timeout, all_rows, quiet, output, cann_version)
            return
        if not names and not list_all:
            raise click.UsageError("name one or more APIs (e.g. torch.nn.functional.gelu), or use --list")
        try:
            if list_all:
                entries = api.ops_list(soc=soc, version=torch_npu_version, status=status)
                if fmt != "text":
                    write_output(as_text[fmt]([e.to_dict() for e in entries]), None)
                else:
                    for e in entries:
                        click.echo(f"{e.name:<60} {e.status:<13} {', '.join(e.dtypes) or '-'}")
                return
            rows = api.ops(names, soc=soc, version=torch_npu_version)
        except CoverageError as exc:
            _fail(str(exc))
        if output:
            write_output(json.dumps(rows, indent=2, ensure_ascii=False) + "\n", output)
        if fmt != "text":
            write_output(as_text[fmt](rows), None)
        else:
            click.echo(format_text(rows), nl=False)
        if any(row.get("unknown_api") for row in rows):
            sys.exit(EXIT_FINDINGS)


def _trace_ops(target: str, script_args: tuple[str, ...], soc: str, torch_npu_version: str | None, fmt: str, steps: int,
               fake: bool, entry: str | None, bf16_policy: str, fail_on: str | None, root: str | None, timeout: float,
               all_rows: bool, quiet: bool, output: str | None = None, cann_version: str | None = None) -> None:
    import json

    from migrator import api
    from migrator.ground.model import SEVERITY_RANK
    from migrator.reporters.census import render as render_census
    from migrator.reporters.ops_csv import render_census as census_csv

    with ProgressDisplay(quiet) as progress:
        census, path, settings = api.trace_ops(target, root=root, soc=soc, torch_npu_version=torch_npu_version,
                                               cann_version=cann_version,
                                               script_args=tuple(script_args), steps=steps, fake=fake, entry=entry,
                                               bf16_policy=bf16_policy, timeout=timeout, progress=progress)
    if output:
        write_output(json.dumps(census.to_json(), indent=1, ensure_ascii=False) + "\n", output)
    if fmt == "json":
        write_output(json.dumps(census.to_json(), indent=1, ensure_ascii=False) + "\n", None)
    elif fmt == "csv":
        write_output(census_csv(census), None)
    else:
        click.echo(render_census(census, str(path) if path else None, None if all_rows else 40), nl=False)
    floor = fail_on or settings.fail_on
    if floor != "never" and any(o.severity is not None and SEVERITY_RANK[o.severity] >= SEVERITY_RANK[floor]
                                 for o in census.findings):
        sys.exit(EXIT_FINDINGS)


@main.command()
@click.argument("paths", nargs=-1, type=click.Path(path_type=str))
@click.option("-o", "--output", type=click.Path(dir_okay=False), help="Write the report to FILE (.html or .md); without it, print (needs --format).")
@click.option("--format", "fmt", type=click.Choice(["html", "md"]), help="html (self-contained page) or md (GitHub PR comment) [default: from the -o extension].")
@click.option("--fix-record", type=click.Path(dir_okay=False), help="Edits applied by `migrate fix` [default: .migrate/fix-record.json in the scan root, when present].")
@click.option("--validation", type=click.Path(dir_okay=False), help="Validation result JSON (migrator/ground/schema/validation.schema.json).")
@click.option("--plan", "plan_file", type=click.Path(dir_okay=False), help="Parallel plan JSON from `migrate plan -o` (migrator/ground/schema/plan.schema.json).")
@click.option("--diffs", "proposed_diffs", is_flag=True, help="Show, per file, the diff `migrate fix` would apply.")
@click.option("--select", multiple=True, help="Only these codes, prefixes or families (comma-separated).")
@click.option("--ignore", multiple=True, help="Skip these codes, prefixes or families.")
@click.option("--target", type=click.Choice(["npu", "portable"]), help="Migration target [default: npu].")
@click.option("--soc", type=click.Choice(["A2", "A3", "950DT"]), help="Ascend SoC for op coverage [default: A2].")
@click.option("--root", type=click.Path(file_okay=False, exists=True), help="Scan root (default: nearest folder with pyproject.toml or .git).")
@click.option("--no-cache", is_flag=True, help="Ignore and do not update the result cache.")
@click.option("--quiet", "-q", is_flag=True, help="No progress display.")
@click.option("--force", is_flag=True, help="Write -o even onto a scanned file or inside .migrate/.")
@ROUTE_OPTION
def report(paths: tuple[str, ...], output: str | None, fmt: str | None, fix_record: str | None, validation: str | None,
           plan_file: str | None, proposed_diffs: bool, select: tuple[str, ...], ignore: tuple[str, ...],
           target: str | None, soc: str | None, root: str | None, no_cache: bool, quiet: bool,
           force: bool, route: str | None) -> None:
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
        if not force:
            _refuse_overwriting_inputs((output,), settings.root, resolved)
        with ProgressDisplay(quiet) as progress:
            data = api.report(resolved, settings=settings, fix_record=fix_record, validation=validation,
                              proposed_diffs=proposed_diffs, progress=progress, plan=plan_file)
        write_output(render_report(data, fmt), output)
        if output and output != "-" and sys.stderr.isatty():
            click.echo(f"report written to {output}", err=True)


@main.command("rules")
@click.option("--format", "fmt", type=click.Choice(["text", "json", "md"]), default="text", show_default=True)
@click.option("-o", "--output", type=click.Path(dir_okay=False))
def list_rules(fmt: str, output: str | None) -> None:
    """List the rule catalogue."""
    with _Errors():
        from migrator import api
        from migrator.catalogue import docs

        rules = api.rules()
        render = {"text": docs.catalogue_text, "json": docs.catalogue_json, "md": docs.catalogue_markdown}[fmt]
        write_output(render(rules), output)


@main.command("rule")
@click.argument("code")
def show_rule(code: str) -> None:
    """Explain one rule (or a framework route: mindspeed, deepspeed, hf): what it finds, why, the fix, sources."""
    with _Errors():
        from migrator import api
        from migrator.catalogue.docs import rule_markdown, rule_where

        if code.lower() in ROUTE_CHOICES[2:]:  # a framework route: `migrate rule mindspeed`
            from migrator.routes.docs import route_markdown

            click.echo(route_markdown(code.lower()), nl=False)
            return
        rule = api.explain(code)
        click.echo(rule_markdown(rule, heading="#", where=rule_where(rule)), nl=False)


@main.command()
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True)
@click.option("--log", "log_file", type=click.Path(dir_okay=False), help="Also explain the Ascend error codes and messages in this log.")
@click.option("--prefix", type=click.Path(file_okay=False), default="/", show_default=True,
              help="Read install trees (/usr/local/Ascend, /dev) under this folder (a container image, a chroot).")
def doctor(fmt: str, log_file: str | None, prefix: str) -> None:
    """Check this machine's Ascend stack: torch / torch_npu / CANN / driver versions, devices, environment.

    Exit codes: 0 nothing wrong (also on a machine without an NPU), 1 a problem was found, 2 bad arguments.
    """
    with _Errors():
        from migrator.api import doctor as api_doctor
        from migrator.reporters.doctor import doctor_json, doctor_text

        report = api_doctor.doctor(root=prefix, log=log_file)
        click.echo(doctor_json(report) if fmt == "json" else doctor_text(report), nl=False)
        sys.exit(report.exit_code)


@main.command("explain")
@click.argument("code")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True)
def explain_error(code: str, fmt: str) -> None:
    """Explain a CANN / HCCL / torch_npu error CODE (EZ9999, EI0006, ERR00100, ...) or a quoted log line."""
    with _Errors():
        from migrator.api import doctor as api_doctor
        from migrator.reporters.doctor import explanation_text, explanations_json

        found = api_doctor.explain_error(code)
        click.echo(explanations_json(found) if fmt == "json" else "".join(map(explanation_text, found)), nl=False)


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


main.add_command(validate)
main.add_command(plan_command)
main.add_command(advise_command)


if __name__ == "__main__":  # pragma: no cover
    main()
