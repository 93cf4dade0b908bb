"""Ctrl-C at any moment of a `migrate` run prints "interrupted" and exits 130, never a traceback.

Installed first thing by the entry points (`python -m migrator`, the `migrate` script), before click and
the rest are imported: until a command's body runs, SIGINT ends the process at once (nothing started
yet needs undoing). While a command runs (`cli.support._Errors`) SIGINT raises KeyboardInterrupt again,
so scopes end their children on the way out. Only the standard library.
"""

from __future__ import annotations

import os
import signal
import sys
from types import FrameType

EXIT_INTERRUPTED = 130  # 128 + SIGINT, as a shell reports Ctrl-C
MESSAGE = b"migrate: interrupted\n"
_installed = False


def _exit_now(signum: int, frame: FrameType | None) -> None:
    try:
        sys.stderr.flush()
    except Exception:  # noqa: BLE001 - a half-initialised stream must not bring back the traceback
        pass
    os.write(2, MESSAGE)
    os._exit(EXIT_INTERRUPTED)


def install() -> None:
    """From now on (until `raise_in_command`), Ctrl-C exits 130 with one line."""
    global _installed
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:  # started with Ctrl-C ignored (nohup, `&`): keep it so
        return
    signal.signal(signal.SIGINT, _exit_now)
    _installed = True


def raise_in_command() -> None:
    """A command body starts: Ctrl-C raises KeyboardInterrupt (its handler prints the line and exits 130)."""
    if _installed:
        signal.signal(signal.SIGINT, signal.default_int_handler)


def command_done() -> None:
    """The command body ended: back to exiting at once (no "Aborted!" from click on the way out)."""
    if _installed:
        signal.signal(signal.SIGINT, _exit_now)


def run_over() -> None:
    """The command line's work is done: a Ctrl-C now can stop nothing. Python puts SIGINT's default action back
    during its teardown, where one would kill the process (exit -2, no line) after a complete run; so SIGINT is
    blocked: it stays pending and ends with the process, which exits with its own code."""
    if _installed and hasattr(signal, "pthread_sigmask"):
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})


def forget_caught_interrupt() -> None:
    """A caught Ctrl-C must not turn `python -m migrator`'s exit 130 into a death by SIGINT.

    CPython (3.8-3.13) remembers a KeyboardInterrupt that ended any string `exec`/`eval` (dataclass and
    namedtuple creation use them), even when a caller caught it, and under `-m` kills the process with
    SIGINT at exit instead of using the exit code. A string eval resets that flag when it starts.
    """
    exec("None")  # noqa: S102 - a constant: only resets the interpreter's flag


def entry_process() -> bool:
    """Whether this process is a `migrate` command line (not a library user or a test importing the CLI)."""
    return os.path.basename(sys.argv[0]) == "migrate" if sys.argv else False
