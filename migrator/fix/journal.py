"""`migrate fix` writes as one transaction with its record: journal first, then the files, then the
record (the commit), then the journal goes.

The journal (`.migrate/fix-journal.json`) holds this run's record (`fix_record`, before merging),
each file the run will write with its hash before and after, the hash of the record it will merge
into, and the text before the fix of files an earlier run already edited (their earlier edits move
along this run's diff). A run killed at any point, or whose record write failed (disk full), leaves
the journal; the next `fix` at that root first recovers: each journalled file is either as planned
(written) or not (left), and the record is merged from what is on disk — every file original or
fixed, and the record matching the files. A record that already differs from the one the journal
was written against was committed: the journal is only removed.

`MIGRATE_FAULT_AT=<point>` kills the process at a named point (the fault bench and tests):
`journal`, `file:<n>` (after the n-th file written), `written`, `record`.
"""

from __future__ import annotations

import contextlib
import os
import signal
import stat
from collections import Counter
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

from migrator.fix import ledger
from migrator.ground.fix_record import FixRecord, FixRecordError, parse
from migrator.ground.input_files import MAX_TOOL_FILE_BYTES, read_bytes
from migrator.ground.jsonfile import loads_bounded, read_json_or_none
from migrator.ground.safe_text import dumps_exact
from migrator.ground.safe_write import write_bytes
from migrator.ground.serialise import to_data
from migrator.ground.workdir import ensure_folder

JOURNAL_PATH = f"{ledger.RECORD_DIR}/fix-journal.json"
LOCK_PATH = f"{ledger.RECORD_DIR}/fix.lock"
VERSION = 1


@contextlib.contextmanager
def exclusive(root: Path) -> Iterator[None]:
    """Hold `.migrate/fix.lock` for a writing run; a second `fix` on the same tree is refused (UsageError)
    instead of taking over the first's journal and temporary files. No lock where fcntl is missing."""
    try:
        import fcntl
    except ImportError:
        yield
        return
    from migrator.ground.usage_error import UsageError

    ensure_folder(root / ledger.RECORD_DIR)
    try:
        fd = os.open(root / LOCK_PATH, os.O_RDWR | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0), 0o644)
    except OSError as exc:
        raise UsageError(f"{root / LOCK_PATH}: cannot open the fix lock ({exc.strerror or exc}); nothing was written") from None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise UsageError(f"{root}: another `migrate fix` is writing this tree ({LOCK_PATH} is held); "
                             "run one at a time") from None
        yield
    finally:
        os.close(fd)


def fault_point(name: str) -> None:
    if os.environ.get("MIGRATE_FAULT_AT") == name:
        os.kill(os.getpid(), signal.SIGKILL)


def _record_digest(root: Path) -> str:
    try:  # regular files only, opened non-blocking: a FIFO there never stalls the run
        return ledger.sha256(read_bytes(root / ledger.RECORD_PATH, MAX_TOOL_FILE_BYTES))
    except OSError:
        return ""


def begin(root: Path, run: FixRecord, files: list[dict[str, Any]]) -> None:
    """Write the journal (atomically, synced) before any file: `files` are
    `{"path", "before", "after"[, "before_text"]}`, paths relative to `root`. Raises OSError."""
    ledger.check_location(root)
    ensure_folder(root / ledger.RECORD_DIR)
    data = {"journal_version": VERSION, "record_sha256": _record_digest(root), "run": to_data(run), "files": files}
    write_bytes(root / JOURNAL_PATH, dumps_exact(data).encode("utf-8"), root=root)
    fault_point("journal")


def finish(root: Path) -> None:
    """The record is committed: the journal goes."""
    try:
        os.unlink(root / JOURNAL_PATH)
    except FileNotFoundError:
        pass


def recorded_text(root: Path, rels: set[str]) -> set[str]:
    """Of `rels`, the files the record at `root` holds edits of (their before-text goes in the journal)."""
    record = read_json_or_none(root / ledger.RECORD_PATH)
    files = record.get("files") if isinstance(record, dict) else None
    return {f["path"] for f in files or () if isinstance(f, dict) and f.get("path") in rels and f.get("edits")}


def _on_disk(root: Path, rel: str) -> str | None:
    """sha256 of a regular file inside the root, else None."""
    path = root / rel
    try:
        if not stat.S_ISREG(os.lstat(path).st_mode):
            return None
        real = path.resolve()
        if not real.is_relative_to(root.resolve()):
            return None
        return ledger.sha256(real.read_bytes())
    except (OSError, RuntimeError):
        return None


def recover(root: Path) -> str | None:
    """Complete or undo what a killed run left (module docstring); returns a note of what was done,
    None when there was no journal. A journal that cannot be read is set aside, never trusted."""
    path = root / JOURNAL_PATH
    try:
        if not stat.S_ISREG(os.lstat(path).st_mode):
            return None
        # no size cap: our own file, as big as the run's before-texts (a cap would lose the recovery)
        journal: Any = loads_bounded(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError, ValueError):
        journal = None
    if not isinstance(journal, dict) or journal.get("journal_version") != VERSION or not isinstance(journal.get("run"), dict):
        os.replace(path, path.with_name(path.name + ".unreadable"))
        return f"{path}: an unreadable fix journal was set aside (as {path.name}.unreadable)"
    if _record_digest(root) != journal.get("record_sha256"):
        finish(root)  # the record was committed (or replaced) after the journal: nothing to redo
        return None
    try:
        run = parse(journal["run"], f"{path} (run)")
    except FixRecordError:
        os.replace(path, path.with_name(path.name + ".unreadable"))
        return f"{path}: an unreadable fix journal was set aside (as {path.name}.unreadable)"
    planned = [f for f in journal.get("files") or () if isinstance(f, dict) and isinstance(f.get("path"), str)]
    written = {f["path"]: f for f in planned if _on_disk(root, f["path"]) == f.get("after")}
    run = replace(run, files=tuple(f for f in run.files if f.path in written))

    def state_of(rel: str) -> ledger.FileState | None:
        if rel in written:
            f = written[rel]
            current = ledger.read_state(root, rel)
            if current is None:
                return None
            before_text = f.get("before_text")
            before = before_text if isinstance(before_text, str) else current.after
            return ledger.FileState(before, str(f.get("before") or ""), current.after, current.after_sha256)
        return ledger.read_state(root, rel)

    ledger.write_merged(root, run, state_of, Counter(), lambda rel, code: False)
    finish(root)
    return (f"recovered an interrupted fix: {len(written)} of {len(planned)} planned files had been written; "
            f"the fix record now matches the files")
