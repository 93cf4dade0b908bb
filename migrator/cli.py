"""Command line: parses arguments, calls `migrator.api`, picks a reporter, sets the exit code.

Only click and small modules are imported at start-up, so `--help`, `rules` and `rule` are instant.
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

import click

from migrator import __version__

FAIL_CHOICES = click.Choice(["error", "warning", "info", "never"])
EXIT_CLEAN, EXIT_FINDINGS, EXIT_ERROR = 0, 1, 2


def _fail(message: str) -> None:
    click.echo(f"migrate: error: {message}", err=True)
    sys.exit(EXIT_ERROR)


def write_output(text: str, path: str | None) -> None:
    """Print, or write atomically to a file (parent folders created); never a partial file."""
    if not path or path == "-":
        click.echo(text, nl=False)
        return
    target = Path(path)
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as fh:
            fh.write(text)
        os.replace(tmp, target)
    except OSError as exc:
        _fail(f"cannot write {path}: {exc.strerror or exc}")


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
        if exc is None or isinstance(exc, (SystemExit, KeyboardInterrupt, click.exceptions.Exit, click.ClickException)):
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
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True)
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
def scan(paths, fmt, output, select, ignore, fail_on, exit_zero, jobs, no_cache, root, soc, quiet):
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
            jobs=jobs,
            use_cache=not no_cache,
        )
        progress, finish = _progress_bar()
        try:
            result = api.scan(resolved, settings=settings, progress=progress)
        finally:
            finish()
        color = fmt == "text" and not output and sys.stdout.isatty() and "NO_COLOR" not in os.environ
        text = render(result, fmt, color=color)
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
    return EXIT_FINDINGS if any(SEVERITY_RANK[f.severity] >= floor for f in result.findings) else EXIT_CLEAN


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
    """Explain one rule: what it finds, why, what to use instead, the fix, examples."""
    with _Errors():
        from migrator import api
        from migrator.rules.docs import rule_markdown

        click.echo(rule_markdown(api.explain(code), heading="#"), nl=False)


if __name__ == "__main__":  # pragma: no cover
    main()
