"""The fix record (`.migrate/fix-record.json`) is a ledger of what every run applied and declined,
not a snapshot of the last run: a rerun that changes nothing leaves it as it was.

Merge rule (also in the README and the record's JSON schema), per recorded file:
- gone (no longer a regular file inside the root): its edits and declined sites are dropped;
- its bytes hash to the recorded `sha256` (unchanged since a run recorded it): every edit stays;
- its bytes hash to `sha256_before` (the state before the earliest recorded edit): reverted, dropped;
- otherwise (edited since): an edit stays while the file still holds the lines the edit produced
  (`new.sha256`, the hash of lines `new.line`..`new.end_line` joined with `\n`; records of older
  versions carry the lines themselves, `new.text`), and moves to where they are now (the nearest
  match; each match counts once);
- a file this run rewrites gets this run's edits added, earlier ones moved along this run's diff.
A declined site stays while the scan at the end of the run still finds it (as many entries per
path, code and symbol as there are such findings); files and codes the run did not scan keep theirs.
`runtime_modules` lists the `_migrate_runtime.py` modules the fix wrote (portable target), with their
`sha256`: one stays while the file still has those bytes (only then may a later run replace it).
`errors` lists the files the last run could not fix or write (not merged).
"""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Protocol

from migrator.fix.line_map import line_map
from migrator.fix.writer import UnsafeWrite, destination, inside
from migrator.ground.fix_record import (
    Decline,
    Edit,
    FileEntry,
    FixRecord,
    FixRecordError,
    RuntimeModule,
    Span,
    to_bytes,
)
from migrator.ground.fix_record import load_if_present as load_record
from migrator.ground.safe_write import write_bytes
from migrator.ground.workdir import ensure_folder

RECORD_DIR = ".migrate"
RECORD_PATH = f"{RECORD_DIR}/fix-record.json"


class RuleSelection(Protocol):
    """What `scanned_by` needs of a config.RuleSelector."""

    def enabled(self, code: str, default: bool) -> bool: ...


@dataclass(frozen=True)
class FileState:
    """One file as this run found it (`before`) and left it (`after`), texts without a BOM."""

    before: str
    before_sha256: str
    after: str
    after_sha256: str


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def lines_sha256(lines: list[str]) -> str:
    """What the record keeps of an edit's new lines: their hash, not the lines (a 61 KB one-line config
    with 2 001 sites would otherwise store that line 2 001 times)."""
    return sha256("\n".join(lines).encode("utf-8", "surrogatepass"))


def _block_hash(new: Span | None) -> str | None:
    if new is None:
        return None
    if new.sha256 is not None:
        return new.sha256
    if new.text is not None:  # a record of an older version
        return lines_sha256(new.text.split("\n"))
    return None


def check_location(root: Path) -> None:
    """Refuse (UnsafeWrite) a `.migrate` folder or record that is a symlink or lies outside the root, and
    a record this run could not merge into (it would be lost), before anything is written."""
    folder = root / RECORD_DIR
    if folder.is_symlink():
        raise UnsafeWrite(f"{folder}: is a symlink; the fix record is never written through a link "
                          "(remove it, or run with --no-record)")
    if folder.exists() and not folder.is_dir():
        raise UnsafeWrite(f"{folder}: is not a folder; cannot write the fix record (remove it, or run with --no-record)")
    path = destination(root, RECORD_PATH)
    try:
        load_record(path, root)
    except FixRecordError as exc:
        raise UnsafeWrite(f"{exc}; the fix record would be lost (repair or remove it, or run with --no-record)") from None


def write(root: Path, run: FixRecord, states: dict[str, FileState], remaining: Counter[tuple[str, str, str]],
          covered: Callable[[str, str], bool]) -> Path:
    """Merge this run's record into the ledger at `root` and write it atomically; returns its path."""
    return write_merged(root, run, lambda rel: states[rel] if rel in states else read_state(root, rel), remaining,
                        covered)


def write_merged(root: Path, run: FixRecord, state_of: Callable[[str], FileState | None],
                 remaining: Counter[tuple[str, str, str]], covered: Callable[[str, str], bool]) -> Path:
    """`write` with the files' states from `state_of` (each asked once); also the journal's recovery."""
    check_location(root)
    path = destination(root, RECORD_PATH)
    ensure_folder(path.parent)
    seen: dict[str, FileState | None] = {}

    def once(rel: str) -> FileState | None:
        if rel not in seen:
            seen[rel] = state_of(rel)
        return seen[rel]

    write_bytes(path, to_bytes(merge(load_record(path, root), run, once, remaining, covered)), root=root)
    return path


def recorded_runtime_modules(root: Path) -> dict[str, str]:
    """path -> sha256 of the runtime modules recorded at `root` (none when there is no readable record)."""
    try:
        record = load_record(root / RECORD_PATH)
    except FixRecordError:
        return {}
    return {m.path: m.sha256 for m in record.runtime_modules} if record is not None else {}


def scanned_by(selector: RuleSelection, root: Path, paths: list[Path]) -> Callable[[str, str], bool]:
    """Whether a scan of `paths` with `selector` looked for `code` in `rel`: only there can a recorded
    decline be found gone."""
    from migrator.catalogue.loader import load_catalogue

    rules = load_catalogue().rules

    def covered(rel: str, code: str) -> bool:
        rule = rules.get(code)
        if rule is None or not selector.enabled(code, rule.default_enabled):
            return False
        return any(p == root / rel or inside(root / rel, p) for p in paths)

    return covered


def read_state(root: Path, rel: str) -> FileState | None:
    """A recorded file this run did not plan, as it is now; None when gone, outside the root (also
    through a link) or unreadable."""
    from migrator.engine.source import UnreadableSource, decode_python, decode_text

    try:
        path = (root / rel).resolve()
        if not path.is_file() or not inside(path, root.resolve()):
            return None
        data = path.read_bytes()
        text = (decode_python(data) if rel.endswith(".py") else decode_text(data)).text
    except (OSError, UnreadableSource):
        return None
    text = text[1:] if text.startswith("\ufeff") else text
    digest = sha256(data)
    return FileState(text, digest, text, digest)


def merge(old: FixRecord | None, run: FixRecord, state_of: Callable[[str], FileState | None],
          remaining: Counter[tuple[str, str, str]], covered: Callable[[str, str], bool]) -> FixRecord:
    """The ledger after this run (see the module docstring for the rule)."""
    if old is None or old.target != run.target:
        old = FixRecord()  # none yet, or another target's migration: start afresh
    old_files = {f.path: f for f in old.files}
    run_files = {f.path: f for f in run.files}
    files = []
    for rel in sorted(set(old_files) | set(run_files)):
        state = state_of(rel)
        if state is None:
            continue
        entry = _merged_entry(rel, old_files.get(rel), run_files.get(rel), state)
        if entry is not None:
            files.append(entry)
    modules: dict[str, RuntimeModule] = {}
    for m in [*old.runtime_modules, *run.runtime_modules]:
        state = state_of(m.path)
        if state is not None and state.after_sha256 == m.sha256:
            modules[m.path] = m  # still as the fix wrote it (this run's entry wins)
    return replace(run, files=tuple(files), declined=_merged_declines(old, run, state_of, remaining, covered),
                   runtime_modules=tuple(modules[p] for p in sorted(modules)))


def _merged_declines(old: FixRecord, run: FixRecord, state_of: Callable[[str], FileState | None],
                     remaining: Counter[tuple[str, str, str]], covered: Callable[[str, str], bool]) -> tuple[Decline, ...]:
    declined = []
    taken: Counter[tuple[str, str, str]] = Counter()
    old_declined = [d for d in old.declined if state_of(d.path) is not None]
    # an earlier run's entry that this run declined again (same site, same reason) is listed once
    again = Counter((*d.site, d.reason) for d in run.declined)
    for is_old, d in [*((False, d) for d in run.declined), *((True, d) for d in old_declined)]:
        if is_old and again[(*d.site, d.reason)] > 0:
            again[(*d.site, d.reason)] -= 1
            continue
        if covered(d.path, d.code):
            if taken[d.site] >= remaining.get(d.site, 0):
                continue  # the site is gone (fixed, edited away or suppressed)
            taken[d.site] += 1
        declined.append(d)
    return tuple(declined)


def _merged_entry(rel: str, old: FileEntry | None, run: FileEntry | None, state: FileState) -> FileEntry | None:
    kept = _surviving(rel, old, state) if old is not None else []
    if kept and state.after != state.before:
        kept = _moved(rel, kept, state.before, state.after)
    edits = kept + (list(run.edits) if run else [])
    if not edits:
        return None
    edits.sort(key=lambda e: (e.cell or 0, e.block_line or 0, e.code))
    first = old.sha256_before if kept and old is not None else state.before_sha256
    return FileEntry(path=rel, sha256=state.after_sha256, sha256_before=first or None, edits=tuple(edits))


def _surviving(rel: str, old: FileEntry, state: FileState) -> list[Edit]:
    edits = list(old.edits)
    if not old.sha256 or old.sha256 == state.before_sha256:
        return edits  # unchanged since recorded (or a record of an older version: kept as it was)
    if old.sha256_before == state.before_sha256:
        return []  # reverted
    return _relocated(rel, edits, state.before)


def _lines(rel: str, text: str) -> Callable[[int | None], list[str]]:
    if rel.endswith(".ipynb"):
        from migrator.engine.notebook import cell_lines

        cells = cell_lines(text)
        return lambda cell: cells.get(cell or 0, [])
    lines = text.splitlines()
    return lambda cell: lines


def _relocated(rel: str, edits: list[Edit], text: str) -> list[Edit]:
    """The edits whose new lines are still in `text` (by their hash), moved to the nearest place they are now."""
    lines_of = _lines(rel, text)
    groups: dict[tuple[int, int], list[Edit]] = {}
    kept = []
    for e in edits:
        if e.new is None or _block_hash(e.new) is None or e.new.line is None:
            kept.append(e)  # nothing to look for: kept as recorded
        else:
            groups.setdefault((e.cell or 0, e.new.line), []).append(e)
    claimed: set[tuple[int, int]] = set()
    windows: dict[tuple[int, int], dict[str, list[int]]] = {}  # (cell, lines) -> block hash -> its starts

    def starts(cell: int, edit: Edit) -> list[int]:
        size = _size(edit)
        if (cell, size) not in windows:
            lines = lines_of(cell)
            found: dict[str, list[int]] = {}
            for s in range(1, len(lines) - size + 2):
                found.setdefault(lines_sha256(lines[s - 1:s - 1 + size]), []).append(s)
            windows[(cell, size)] = found
        return windows[(cell, size)].get(_block_hash(edit.new) or "", [])

    for (cell, start), group in sorted(groups.items()):
        spots = [s for s in starts(cell, group[0])
                 if (cell, s) not in claimed and all(s in starts(cell, e) for e in group)]
        if not spots:
            continue  # the edit's lines are gone: reverted or rewritten by hand
        spot = min(spots, key=lambda s: (abs(s - start), s))
        claimed.add((cell, spot))
        kept.extend(_shifted(e, spot - start) for e in group)
    return kept


def _span_lines(new: Span) -> tuple[int, int]:
    """First and last line of a span that has a line (its end defaults to it)."""
    assert new.line is not None
    return new.line, new.end_line if new.end_line is not None else new.line


def _size(edit: Edit) -> int:
    assert edit.new is not None
    first, last = _span_lines(edit.new)
    return max(1, last - first + 1)


def _shifted(edit: Edit, by: int) -> Edit:
    assert edit.new is not None
    first, last = _span_lines(edit.new)
    return replace(edit, new=replace(edit.new, line=first + by, end_line=last + by))


def _moved(rel: str, edits: list[Edit], before: str, after: str) -> list[Edit]:
    """Earlier edits carried along this run's rewrite of the file (line numbers and text)."""
    old_lines, new_lines = _lines(rel, before), _lines(rel, after)
    maps: dict[int, tuple[dict[int, tuple[int, int]], list[str]]] = {}
    moved = []
    for e in edits:
        if e.new is None or e.new.line is None:
            moved.append(e)
            continue
        cell = e.cell or 0
        if cell not in maps:
            mapping, _ = line_map("\n".join(old_lines(cell)), "\n".join(new_lines(cell)))
            maps[cell] = (mapping, new_lines(cell))
        mapping, lines = maps[cell]
        line, end = _span_lines(e.new)
        first = mapping.get(line, (line, line))[0]
        last = max(first, mapping.get(end, (end, end))[1])
        span = replace(e.new, line=first, end_line=last)
        if 0 < last <= len(lines):
            span = replace(span, end_column=len(lines[last - 1]) + 1, text=None,
                           sha256=lines_sha256(lines[first - 1:last]))
        moved.append(replace(e, new=span))
    return moved
