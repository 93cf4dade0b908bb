"""The built rule catalogue kept between runs: one pickle per key, read back instead of the YAML.

Building the rules (YAML parse, checks, frozen dataclasses) was most of a short scan's start-up. The key is
a digest of everything the built rules depend on: each rule file's name and bytes, the source of the code
that reads and checks them, the names of the rule unit modules (a `fix: unit` needs its module), the
tool's and Python's versions. So a cache can never give rules the YAML would not: any change is a new key.
A missing, unreadable, corrupt or foreign file is ignored (the YAML is read, and the cache written
again); a cache that cannot be written is ignored too. Written atomically (`safe_write`), so two runs at
once each see a whole file or none. The folder: `ground/start_cache.py` ("catalogue").
"""

from __future__ import annotations

import hashlib
import os
import pickle
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TypeVar

import migrator
from migrator.ground import start_cache

T = TypeVar("T")

FORMAT = 1
SUFFIX = ".pickle"
MAX_AGE_DAYS = 30  # another key's file unused this long goes when a new one is written
# the modules whose code decides what the YAML builds (classes, checks, families, kinds)
_CODE = ("migrator.catalogue.loader", "migrator.catalogue.impls", "migrator.catalogue.units",
         "migrator.ground.kinds", "migrator.ground.model")


def folder() -> Path | None:
    """Where the cache lives; None when it is turned off."""
    return start_cache.folder("catalogue")


def key(files: Sequence[tuple[Path, bytes]]) -> str | None:
    """The digest of the rule files (name, bytes) and of the code and versions that build them; None
    when a source file cannot be read (then nothing is cached)."""
    digest = hashlib.sha256(f"{FORMAT}\0{migrator.__version__}\0{sys.version}\0".encode())
    for path, data in files:
        digest.update(f"{path.name}\0{len(data)}\0".encode())
        digest.update(data)
    try:
        for name in _CODE:
            source = sys.modules[name].__file__
            if source is None:
                return None
            data = Path(source).read_bytes()
            digest.update(f"{name}\0{len(data)}\0".encode())
            digest.update(data)
    except (KeyError, OSError):
        return None
    digest.update("\0".join(_unit_modules()).encode())
    return digest.hexdigest()[:32]


def _unit_modules() -> list[str]:
    """The rule unit modules there are (`rules/F/name.py`), sorted: a deleted unit changes the key."""
    base = Path(migrator.__file__).parent / "rules"
    found: list[str] = []
    for here, subs, names in os.walk(base):
        subs.sort()
        found.extend(os.path.relpath(os.path.join(here, n), base) for n in sorted(names) if n.endswith(".py"))
    return found


def read(cache_key: str, kind: type[T], digest: str) -> T | None:
    """The catalogue (a `kind`) kept under `cache_key`, or None (missing, unreadable, corrupt, not a
    catalogue of `digest`)."""
    where = folder()
    if where is None:
        return None
    try:
        with open(where / f"{cache_key}{SUFFIX}", "rb") as fh:
            kept = pickle.load(fh)
    except Exception:  # noqa: BLE001 - any broken cache only costs the YAML
        return None
    return kept if isinstance(kept, kind) and getattr(kept, "digest", None) == digest else None


def write(cache_key: str, catalogue: object) -> None:
    """Keep `catalogue` under `cache_key`; a folder that cannot be written is left as it is."""
    from migrator.ground.safe_write import write_bytes

    where = folder()
    if where is None:
        return
    try:
        data = pickle.dumps(catalogue, protocol=pickle.HIGHEST_PROTOCOL)
        where.mkdir(parents=True, exist_ok=True)
        write_bytes(where / f"{cache_key}{SUFFIX}", data)
    except (OSError, pickle.PicklingError):
        return
    _prune(where, keep=f"{cache_key}{SUFFIX}")


def _prune(where: Path, keep: str) -> None:
    cutoff = time.time() - MAX_AGE_DAYS * 86400
    try:
        for entry in os.scandir(where):
            if entry.name != keep and entry.name.endswith(SUFFIX) and entry.stat().st_mtime < cutoff:
                os.unlink(entry.path)
    except OSError:
        pass
