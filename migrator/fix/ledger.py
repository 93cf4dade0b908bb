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
import json
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from migrator.fix.line_map import line_map
from migrator.fix.writer import UnsafeWrite, destination, inside
from migrator.jsonfile import read_json_or_none
from migrator.safe_write import write_bytes
from migrator.workdir import ensure_folder

RECORD_DIR = ".migrate"
RECORD_PATH = f"{RECORD_DIR}/fix-record.json"


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


def _block_hash(new: dict) -> str | None:
    if isinstance(new.get("sha256"), str):
        return new["sha256"]
    if isinstance(new.get("text"), str):  # a record of an older version
        return lines_sha256(new["text"].split("\n"))
    return None


def check_location(root: Path) -> None:
    """Refuse (UnsafeWrite) a `.migrate` folder or record that is a symlink or lies outside the root,
    before anything is written."""
    folder = root / RECORD_DIR
    if folder.is_symlink():
        raise UnsafeWrite(f"{folder}: is a symlink; the fix record is never written through a link "
                          "(remove it, or run with --no-record)")
    if folder.exists() and not folder.is_dir():
        raise UnsafeWrite(f"{folder}: is not a folder; cannot write the fix record (remove it, or run with --no-record)")
    destination(root, RECORD_PATH)


def write(root: Path, run: dict[str, Any], states: dict[str, FileState], remaining: Counter,
          covered: Callable[[str, str], bool]) -> Path:
    """Merge this run's record into the ledger at `root` and write it atomically; returns its path."""
    return write_merged(root, run, lambda rel: states[rel] if rel in states else read_state(root, rel), remaining,
                        covered)


def write_merged(root: Path, run: dict[str, Any], state_of: Callable[[str], FileState | None], remaining: Counter,
                 covered: Callable[[str, str], bool]) -> Path:
    """`write` with the files' states from `state_of` (each asked once); also the journal's recovery."""
    check_location(root)
    path = destination(root, RECORD_PATH)
    ensure_folder(path.parent)
    seen: dict[str, FileState | None] = {}

    def once(rel: str) -> FileState | None:
        if rel not in seen:
            seen[rel] = state_of(rel)
        return seen[rel]

    merged = merge(read_json_or_none(path), run, once, remaining, covered)
    write_bytes(path, (json.dumps(merged, indent=2, ensure_ascii=False) + "\n").encode("utf-8"), root=root)
    return path


def recorded_runtime_modules(root: Path) -> dict[str, str]:
    """path -> sha256 of the runtime modules recorded at `root` (none when there is no readable record)."""
    record = read_json_or_none(root / RECORD_PATH)
    if not isinstance(record, dict):
        return {}
    return {e["path"]: e["sha256"] for e in _entries(record.get("runtime_modules"), ("path", "sha256"))}


def scanned_by(selector, root: Path, paths: list[Path]) -> Callable[[str, str], bool]:
    """Whether a scan of `paths` with `selector` (a config.RuleSelector) looked for `code` in `rel`:
    only there can a recorded decline be found gone."""
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


def merge(old: Any, run: dict[str, Any], state_of: Callable[[str], FileState | None], remaining: Counter,
          covered: Callable[[str, str], bool]) -> dict[str, Any]:
    """The ledger after this run (see the module docstring for the rule)."""
    if not isinstance(old, dict) or old.get("target") != run["target"]:
        old = {}  # none yet, unreadable, or another target's migration: start afresh
    old_files = {f["path"]: f for f in _entries(old.get("files"), ("path", "edits"))}
    run_files = {f["path"]: f for f in run["files"]}
    files = []
    for rel in sorted(set(old_files) | set(run_files)):
        state = state_of(rel)
        if state is None:
            continue
        entry = _merged_entry(rel, old_files.get(rel), run_files.get(rel), state)
        if entry is not None:
            files.append(entry)
    declined = []
    taken: Counter = Counter()
    old_declined = [d for d in _entries(old.get("declined"), ("path", "code", "symbol", "reason"))
                    if state_of(d["path"]) is not None]
    # an earlier run's entry that this run declined again (same site, same reason) is listed once
    again = Counter((d["path"], d["code"], d["symbol"], d["reason"]) for d in run["declined"])
    for is_old, d in [*((False, d) for d in run["declined"]), *((True, d) for d in old_declined)]:
        key = (d["path"], d["code"], d["symbol"])
        if is_old and again[(*key, d["reason"])] > 0:
            again[(*key, d["reason"])] -= 1
            continue
        if covered(d["path"], d["code"]):
            if taken[key] >= remaining.get(key, 0):
                continue  # the site is gone (fixed, edited away or suppressed)
            taken[key] += 1
        declined.append(d)
    modules = {}
    for e in [*_entries(old.get("runtime_modules"), ("path", "sha256")), *run.get("runtime_modules", [])]:
        state = state_of(e["path"])
        if state is not None and state.after_sha256 == e["sha256"]:
            modules[e["path"]] = e  # still as the fix wrote it (this run's entry wins)
    return {**run, "files": files, "declined": declined, "runtime_modules": [modules[p] for p in sorted(modules)]}


def _entries(items: Any, keys: tuple[str, ...]) -> list[dict[str, Any]]:
    if not isinstance(items, list):
        return []
    return [e for e in items if isinstance(e, dict) and all(k in e for k in keys) and isinstance(e["path"], str)]


def _merged_entry(rel: str, old: dict | None, run: dict | None, state: FileState) -> dict[str, Any] | None:
    kept = _surviving(rel, old, state) if old is not None else []
    if kept and state.after != state.before:
        kept = _moved(rel, kept, state.before, state.after)
    edits = kept + (run["edits"] if run else [])
    if not edits:
        return None
    edits.sort(key=lambda e: (e.get("cell") or 0, _new(e).get("line") or 0, e.get("code", "")))
    first = old.get("sha256_before") if kept and old is not None else state.before_sha256
    entry: dict[str, Any] = {"path": rel, "sha256": state.after_sha256}
    if first:
        entry["sha256_before"] = first
    entry["edits"] = edits
    return entry


def _new(edit: dict) -> dict:
    new = edit.get("new")
    return new if isinstance(new, dict) else {}


def _surviving(rel: str, old: dict, state: FileState) -> list[dict]:
    edits = [e for e in old["edits"] if isinstance(e, dict)] if isinstance(old["edits"], list) else []
    recorded = old.get("sha256")
    if not recorded or recorded == state.before_sha256:
        return edits  # unchanged since recorded (or a record of an older version: kept as it was)
    if old.get("sha256_before") == state.before_sha256:
        return []  # reverted
    return _relocated(rel, edits, state.before)


def _lines(rel: str, text: str) -> Callable[[int | None], list[str]]:
    if rel.endswith(".ipynb"):
        from migrator.engine.notebook import cell_lines

        cells = cell_lines(text)
        return lambda cell: cells.get(cell or 0, [])
    lines = text.splitlines()
    return lambda cell: lines


def _relocated(rel: str, edits: list[dict], text: str) -> list[dict]:
    """The edits whose new lines are still in `text` (by their hash), moved to the nearest place they are now."""
    lines_of = _lines(rel, text)
    groups: dict[tuple[int, int], list[dict]] = {}
    kept = []
    for e in edits:
        new = _new(e)
        if _block_hash(new) is None or not isinstance(new.get("line"), int) or not isinstance(new.get("end_line", 0), int):
            kept.append(e)  # nothing to look for: kept as recorded
        else:
            groups.setdefault((e.get("cell") or 0, new["line"]), []).append(e)
    claimed: set[tuple[int, int]] = set()
    windows: dict[tuple[int, int], dict[str, list[int]]] = {}  # (cell, lines) -> block hash -> its starts

    def starts(cell: int, size: int, digest: str) -> list[int]:
        if (cell, size) not in windows:
            lines = lines_of(cell)
            found: dict[str, list[int]] = {}
            for s in range(1, len(lines) - size + 2):
                found.setdefault(lines_sha256(lines[s - 1:s - 1 + size]), []).append(s)
            windows[(cell, size)] = found
        return windows[(cell, size)].get(digest, [])

    for (cell, start), group in sorted(groups.items()):
        first = group[0]
        spots = [s for s in starts(cell, _size(first), _block_hash(_new(first)) or "")
                 if (cell, s) not in claimed and all(s in starts(cell, _size(e), _block_hash(_new(e)) or "") for e in group)]
        if not spots:
            continue  # the edit's lines are gone: reverted or rewritten by hand
        spot = min(spots, key=lambda s: (abs(s - start), s))
        claimed.add((cell, spot))
        kept.extend(_shifted(e, spot - start) for e in group)
    return kept


def _size(edit: dict) -> int:
    new = _new(edit)
    return max(1, int(new.get("end_line", new["line"])) - int(new["line"]) + 1)


def _shifted(edit: dict, by: int) -> dict:
    new = _new(edit)
    return {**edit, "new": {**new, "line": new["line"] + by, "end_line": new.get("end_line", new["line"]) + by}}


def _moved(rel: str, edits: list[dict], before: str, after: str) -> list[dict]:
    """Earlier edits carried along this run's rewrite of the file (line numbers and text)."""
    old_lines, new_lines = _lines(rel, before), _lines(rel, after)
    maps: dict[int, tuple[dict, list[str]]] = {}
    moved = []
    for e in edits:
        new = _new(e)
        if not isinstance(new.get("line"), int):
            moved.append(e)
            continue
        cell = e.get("cell") or 0
        if cell not in maps:
            mapping, _ = line_map("\n".join(old_lines(cell)), "\n".join(new_lines(cell)))
            maps[cell] = (mapping, new_lines(cell))
        mapping, lines = maps[cell]
        first = mapping.get(new["line"], (new["line"], new["line"]))[0]
        end = new.get("end_line", new["line"])
        last = max(first, mapping.get(end, (end, end))[1])
        span = {**new, "line": first, "end_line": last}
        if 0 < last <= len(lines):
            span["end_column"] = len(lines[last - 1]) + 1
            span.pop("text", None)
            span["sha256"] = lines_sha256(lines[first - 1:last])
        moved.append({**e, "new": span})
    return moved
