"""The census file `.migrate/op-trace.json` in the scan root: write it, load it (schema-checked),
and the traced facts `scan` and `report` use. Standard library only (the scanner imports this).

`scan` uses `traced_apis(root)`: API name -> the first-argument dtypes the training step ran it
with. A `partial` op with such facts is judged on them instead of the static dtype-unknown note.
"""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path

from migrator.ground.safe_write import write_text
from migrator.ground.workdir import CENSUS_FILE

from .model import Census, PerfSite, first_dtype

SCHEMA = "op-trace.schema.json"


class CensusFileError(ValueError):
    """The census file cannot be read or does not match its schema (the message names the file)."""


def census_path(root: str | Path) -> Path:
    return Path(root) / CENSUS_FILE


def write(root: str | Path, census: Census) -> Path:
    """Write atomically (never a half-written file); returns the path."""
    from migrator.ground.workdir import ensure_folder

    path = census_path(root)
    ensure_folder(path.parent)
    write_text(path, json.dumps(census.to_json(), indent=1, ensure_ascii=False) + "\n", root=Path(root), mode=0o644)
    return path


def load(path: str | Path, root: str | Path | None = None) -> Census:
    """The census at ``path`` (never read through a link out of ``root``, where one is given)."""
    from migrator.ground.jsonfile import read_json
    from migrator.ground.schema_check import SchemaMismatch, check

    path = Path(path)
    data = read_json(path, "op census", CensusFileError, root=Path(root) if root is not None else None)
    try:
        check(data, SCHEMA)
    except SchemaMismatch as exc:
        raise CensusFileError(f"{path}: does not match the op census schema (migrator/ground/schema/{SCHEMA}): {exc}") from None
    return Census.from_json(data)


def load_for_root(root: str | Path) -> tuple[Census | None, str | None]:
    """(census, None) when the root has a valid one; (None, reason) when it is broken; (None, None)."""
    path = census_path(root)
    if not path.is_file():
        return None, None
    try:
        return load(path, root), None
    except CensusFileError as exc:
        return None, f"op census ignored: {exc}"


@lru_cache(maxsize=8)
def _traced(path: str, mtime_ns: int) -> tuple[tuple[str, tuple[str, ...]], ...]:
    census, _ = load_for_root(Path(path).parent.parent)
    if census is None:
        return ()
    seen: dict[str, set[str]] = {}
    for op in census.ops:
        if op.level != "api":
            continue
        dtype = first_dtype(op.dtypes)
        bucket = seen.setdefault(op.op, set())
        if dtype is not None:
            bucket.add(dtype)
    return tuple((name, tuple(sorted(d))) for name, d in sorted(seen.items()))


def traced_apis(root: str | Path) -> tuple[tuple[str, tuple[str, ...]], ...]:
    """(API name, dtypes seen) for every torch API the traced training step ran; () without a census."""
    path = census_path(root)
    try:
        mtime = path.stat().st_mtime_ns
    except OSError:
        return ()
    return _traced(str(path), mtime)


@lru_cache(maxsize=8)
def _perf(path: str, mtime_ns: int) -> tuple[PerfSite, ...]:
    census, _ = load_for_root(Path(path).parent.parent)
    return census.perf if census is not None else ()


def traced_perf(root: str | Path) -> tuple[PerfSite, ...]:
    """The perf lint's census sites (dynamic shapes, AICPU rules); () without a census."""
    path = census_path(root)
    try:
        mtime = path.stat().st_mtime_ns
    except OSError:
        return ()
    return _perf(str(path), mtime)
