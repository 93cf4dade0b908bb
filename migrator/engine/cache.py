"""Content-hash cache of per-file results, one pickle per (root, settings) in the user cache dir.

Keyed by tool version, catalogue digest, coverage table and settings, so any change of those
starts afresh. A cache that cannot be read or written is silently ignored, never an error. The
folder is the platform's user cache folder (`platformdirs`; `$XDG_CACHE_HOME/ascend-migrate/scan`
on Linux, `MIGRATE_CACHE_DIR` overrides); files unused for `MAX_AGE_DAYS` are pruned on write,
and `migrate cache clean` empties it.
"""

from __future__ import annotations

import hashlib
import os
import pickle
import time
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from migrator.engine.scanned import ScannedFile

FORMAT = 7  # 2: Finding.imported; 3: ScannedFile (training-dtype evidence and variants); 4: own helpers unmarked;
# 5: a noqa where a multi-line string ends applies to its lines, Finding.role; 6: Finding.effort;
# 7: ScannedFile.framework_imports
MAX_AGE_DAYS = 30
SUFFIX = ".pickle"


def cache_dir() -> Path:
    explicit = os.environ.get("MIGRATE_CACHE_DIR")
    if explicit:
        return Path(explicit)
    from platformdirs import user_cache_path

    return user_cache_path("ascend-migrate", appauthor=False) / "scan"


def _cache_files(folder: Path) -> list[Path]:
    try:
        return [p for p in folder.iterdir() if p.suffix in (SUFFIX, ".tmp") and p.is_file()]
    except OSError:
        return []


def prune(folder: Path | None = None, max_age_days: float = MAX_AGE_DAYS, now: float | None = None) -> int:
    """Delete cache files not written for `max_age_days`; how many went."""
    cutoff = (time.time() if now is None else now) - max_age_days * 86400
    removed = 0
    for path in _cache_files(folder or cache_dir()):
        try:
            if path.stat().st_mtime < cutoff:
                path.unlink()
                removed += 1
        except OSError:
            pass
    return removed


def clean(folder: Path | None = None) -> tuple[int, int]:
    """Delete every cache file; (files, bytes) removed. Other files in the folder are left alone."""
    files = size = 0
    for path in _cache_files(folder or cache_dir()):
        try:
            length = path.stat().st_size
            path.unlink()
        except OSError:
            continue
        files, size = files + 1, size + length
    return files, size


def content_digest(data: bytes) -> str:
    return hashlib.blake2b(data, digest_size=16).hexdigest()


class ScanCache:
    def __init__(self, root: Path, key: str):
        name = hashlib.sha256(f"{FORMAT}|{root.resolve()}|{key}".encode()).hexdigest()[:24]
        self.name = f"{name}{SUFFIX}"
        self.entries: dict[str, tuple[str, ScannedFile]] = {}
        self.dirty = False

    @cached_property
    def path(self) -> Path:  # the folder looked up only when the cache is used (not under --no-cache)
        return cache_dir() / self.name

    def load(self) -> None:
        try:
            with open(self.path, "rb") as fh:
                data = pickle.load(fh)
            if isinstance(data, dict):
                self.entries = data
        except Exception:  # noqa: BLE001 - a broken cache only costs a cold scan
            self.entries = {}

    def get(self, rel: str, digest: str) -> ScannedFile | None:
        hit = self.entries.get(rel)
        return hit[1] if hit and hit[0] == digest else None

    def put(self, rel: str, digest: str, result: ScannedFile) -> None:
        self.entries[rel] = (digest, result)
        self.dirty = True

    def save(self) -> None:
        """Write back (entries of files not scanned this time are kept: explicit-file runs)."""
        if not self.dirty:
            return
        entries = self.entries
        try:
            from migrator.ground.safe_write import write_bytes  # (tempfile, shutil) when a cache is written

            write_bytes(self.path, pickle.dumps(entries, protocol=pickle.HIGHEST_PROTOCOL))
        except OSError:
            return
        prune(self.path.parent)
