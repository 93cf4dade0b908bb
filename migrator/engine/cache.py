"""Content-hash cache of per-file results, one pickle per (root, settings) in the user cache dir.

Keyed by tool version, catalogue digest, coverage table and settings, so any change of those
starts afresh. A cache that cannot be read or written is silently ignored, never an error.
"""

from __future__ import annotations

import hashlib
import os
import pickle
import tempfile
from pathlib import Path

from migrator.model import FileResult

FORMAT = 1


def cache_dir() -> Path:
    explicit = os.environ.get("MIGRATE_CACHE_DIR")
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "ascend-migrate" / "scan"


def content_digest(data: bytes) -> str:
    return hashlib.blake2b(data, digest_size=16).hexdigest()


class ScanCache:
    def __init__(self, root: Path, key: str):
        name = hashlib.sha256(f"{FORMAT}|{root.resolve()}|{key}".encode()).hexdigest()[:24]
        self.path = cache_dir() / f"{name}.pickle"
        self.entries: dict[str, tuple[str, FileResult]] = {}
        self.dirty = False

    def load(self) -> None:
        try:
            with open(self.path, "rb") as fh:
                data = pickle.load(fh)
            if isinstance(data, dict):
                self.entries = data
        except Exception:  # noqa: BLE001 - a broken cache only costs a cold scan
            self.entries = {}

    def get(self, rel: str, digest: str) -> FileResult | None:
        hit = self.entries.get(rel)
        return hit[1] if hit and hit[0] == digest else None

    def put(self, rel: str, digest: str, result: FileResult) -> None:
        self.entries[rel] = (digest, result)
        self.dirty = True

    def save(self) -> None:
        """Write back (entries of files not scanned this time are kept: explicit-file runs)."""
        if not self.dirty:
            return
        entries = self.entries
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=self.path.parent, suffix=".tmp")
            with os.fdopen(fd, "wb") as fh:
                pickle.dump(entries, fh, protocol=pickle.HIGHEST_PROTOCOL)
            os.replace(tmp, self.path)
        except OSError:
            pass
