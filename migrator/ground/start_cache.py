"""Where the start-up cache lives (the built rule catalogue, `catalogue/rule_cache.py`): `$MIGRATE_CACHE_DIR/<name>`
(tests set it), else the platform's user cache folder, never the scanned project. `MIGRATE_START_CACHE=0` turns it
off."""

from __future__ import annotations

import os
import sys
from pathlib import Path


def folder(name: str) -> Path | None:
    """The folder of the start-up cache `name`; None when the caches are turned off."""
    if os.environ.get("MIGRATE_START_CACHE", "1") == "0":
        return None
    explicit = os.environ.get("MIGRATE_CACHE_DIR")
    if explicit:
        return Path(explicit) / name
    if sys.platform == "linux":  # what platformdirs answers there, without its import
        xdg = os.environ.get("XDG_CACHE_HOME", "").strip()
        return Path(xdg or os.path.expanduser("~/.cache")) / "ascend-migrate" / name
    from platformdirs import user_cache_path

    return user_cache_path("ascend-migrate", appauthor=False) / name
