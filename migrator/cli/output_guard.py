"""Outputs never overwrite inputs: `-o` / `--write-baseline` onto a scanned source, or anywhere in the
root's `.migrate/` (the fix record, its journal, the lock), is refused unless `--force`.

`scan -o x.py` replaced the user's source and `scan -o .migrate/fix-record.json` the edit history
(issue 38). Config-like files (`.json`, `.yaml`, `.toml` other than pyproject.toml) are not refused:
rewriting last run's `-o report.json` inside the tree is the common case, and the scanner only peeks
at them. Only the standard library here; the scanner's file kinds are imported when a check runs.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Sequence
from pathlib import Path

RECORD_DIR = ".migrate"  # the same as migrator.fix.ledger.RECORD_DIR (not imported: the CLI stays light)


def refused_output(output: str | None, root: Path, inputs: Sequence[Path]) -> str | None:
    """Why writing `output` would overwrite one of the run's inputs, or None when it may be written."""
    if not output or output == "-":
        return None
    target = Path(os.path.realpath(output))
    try:
        mode: int | None = os.stat(target).st_mode
    except OSError:
        mode = None
    if mode is not None and not stat.S_ISREG(mode):
        return None  # a device or FIFO is written in place; a folder is refused by the writer
    own = Path(os.path.realpath(root)) / RECORD_DIR
    if target == own or target.is_relative_to(own):
        return (f"{output}: is inside {root / RECORD_DIR}/ (the fix record, its journal and lock live there); "
                "refused: choose another path, or pass --force")
    if mode is None:
        return None
    if _is_scanned(target, inputs):
        return f"{output}: is a file this run scans; writing there would replace it; refused: choose another path, or pass --force"
    return None


def _is_scanned(target: Path, inputs: Sequence[Path]) -> bool:
    from migrator.engine.discover import file_kind

    for start in inputs:
        real = Path(os.path.realpath(start))
        if target == real:
            return True  # named on the command line
        if real.is_dir() and target.is_relative_to(real) and file_kind(target) not in (None, "config"):
            return True
    return False
