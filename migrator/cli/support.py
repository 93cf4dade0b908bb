"""What every command shares: exit codes, option choices, the error line and writing an output.

Only click and the standard library: imported on every run.
"""

from __future__ import annotations

import contextlib
import os
import sys
from types import TracebackType
from typing import TYPE_CHECKING, Literal, NoReturn

import click

if TYPE_CHECKING:  # rich is imported when a bar first shows
    from rich.progress import Progress, TaskID

FAIL_CHOICES = click.Choice(["error", "warning", "info", "never"])
EXIT_CLEAN, EXIT_FINDINGS, EXIT_ERROR = 0, 1, 2
# the names are repeated from migrator.routes.CHOICES so that --help imports nothing (a test keeps them equal)
ROUTE_CHOICES = ("auto", "none", "mindspeed", "deepspeed", "hf")
ROUTE_OPTION = click.option(
    "--route", type=click.Choice(ROUTE_CHOICES), default=None,
    help="Framework route: findings MindSpeed / DeepSpeed / transformers handle on Ascend are `covered` [default: auto].",
)


def _fail(message: str) -> NoReturn:
    from migrator.ground.safe_text import visible

    click.echo(f"migrate: error: {visible(message)}", err=True)
    sys.exit(EXIT_ERROR)


def write_output(text: str, path: str | None) -> None:
    """Print, or write to `path` with the one writer (parent folders created); never a partial file."""
    if not path or path == "-":
        click.echo(text, nl=False)
        return
    from migrator.ground.safe_write import write_text

    try:  # a device or FIFO is written in place (`-o /dev/null` stays a device), a file atomically
        write_text(path, text)
    except OSError as exc:
        _fail(f"cannot write {path}: {exc.strerror or exc}")


def _split_codes(values: tuple[str, ...]) -> tuple[str, ...] | None:
    if not values:
        return None
    from migrator.ground.config import normalise_code

    return tuple(normalise_code(c) for v in values for c in v.split(",") if c.strip())


class _Errors:
    """Turn expected errors into exit 2 with one clear line; unexpected ones into a short report."""

    def __enter__(self) -> _Errors:
        from migrator.ground import interrupt

        interrupt.raise_in_command()  # Ctrl-C now unwinds, so started processes end
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> Literal[False]:
        from migrator.ground import interrupt

        interrupt.command_done()
        interrupt.run_over()  # what is left is the way out, the line below and the exit
        if isinstance(exc, KeyboardInterrupt):
            click.echo("migrate: interrupted", err=True)
            interrupt.forget_caught_interrupt()
            sys.exit(130)  # 128 + SIGINT, as a shell reports Ctrl-C
        if exc is None or isinstance(exc, (SystemExit, click.exceptions.Exit, click.ClickException)):
            return False
        from migrator.api import ConfigError, UsageError
        from migrator.catalogue.loader import CatalogueError

        if isinstance(exc, (UsageError, ConfigError, CatalogueError, FileNotFoundError, FileExistsError)):
            _fail(str(exc))
        if os.environ.get("MIGRATE_DEBUG"):
            return False
        _fail(f"internal error: {exc.__class__.__name__}: {exc} (set MIGRATE_DEBUG=1 for the traceback)")
        return False


def _int_list(text: str | None, name: str) -> tuple[int, ...] | None:
    if text is None:
        return None
    try:
        return tuple(int(x) for x in text.split(",") if x.strip())
    except ValueError:
        _fail(f"{name}: expected comma-separated integers, got {text!r}")


class ProgressDisplay:
    """Progress of a long command on stderr while stderr is a terminal: one rich bar per phase with
    counts, elapsed time and ETA, erased when done. Nothing when stderr is piped or redirected, under
    CI (the `CI` variable) or with -q. Call it as the api's `progress(phase, done, total)`; `note(text)`
    takes a stage line (`migrate validate`) and counts it as one step of `steps`."""

    def __init__(self, quiet: bool = False, steps: int | None = None):
        self.enabled = not quiet and sys.stderr.isatty() and not os.environ.get("CI")
        self._steps, self._noted = steps, 0
        self._bar: Progress | None = None
        self._tasks: dict[str, TaskID] = {}

    def _start(self) -> Progress:
        from rich.console import Console
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            SpinnerColumn,
            TextColumn,
            TimeElapsedColumn,
            TimeRemainingColumn,
        )

        self._bar = Progress(SpinnerColumn(), TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                             TimeElapsedColumn(), TextColumn("ETA"), TimeRemainingColumn(),
                             console=Console(stderr=True), transient=True)
        self._bar.start()
        return self._bar

    def __call__(self, phase: str, done: int, total: int | None) -> None:
        if not self.enabled:
            return
        bar = self._bar or self._start()
        task = self._tasks.get(phase)
        if task is None:
            task = self._tasks[phase] = bar.add_task(phase, total=total)
        bar.update(task, completed=done, total=total)

    def note(self, text: str) -> None:
        if not self.enabled:
            return
        bar = self._bar or self._start()
        task = self._tasks.get("steps")
        if task is None:
            task = self._tasks["steps"] = bar.add_task(text, total=self._steps)
        else:
            self._noted += 1
        bar.update(task, description=text, completed=self._noted)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.stop()
            self._bar = None

    def __enter__(self) -> ProgressDisplay:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


CLEAN_ENV_HELP = ("Give the program's processes only an allow-list of environment variables (PATH, HOME, LANG/LC_*, "
                  "TMPDIR, PYTHON*, MIGRATE_*, CUDA_*/ASCEND_*/HCCL_* device variables, ...; README) so tokens and "
                  "keys stay out; add more with --env NAME.")


def child_environment(clean_env: bool, names: tuple[str, ...]) -> contextlib.AbstractContextManager[None]:
    """`--clean-env` / `--env NAME`: the environment policy of the children this command starts."""
    if not clean_env:
        if names:
            _fail("--env NAME only goes with --clean-env (without it every variable is passed)")
        return contextlib.nullcontext()
    from migrator.validation.parent.launcher import clean_environment

    return clean_environment(names)
