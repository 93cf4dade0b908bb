"""Locate data shipped beside the code, for wheels and for source checkouts alike.

Wheels carry the top-level ``op_coverage/*.json`` (and ``rules/``) as
``migrator/_data/op_coverage/...``; an editable install or a plain checkout reads them from
the repository root. :func:`data_path` is the one place that knows both layouts.
"""

from __future__ import annotations

import importlib.resources
from pathlib import Path

try:  # Python >= 3.11
    from importlib.resources.abc import Traversable
except ImportError:  # pragma: no cover - Python 3.10
    from importlib.abc import Traversable

__all__ = ["data_path", "repo_root"]


def repo_root() -> Path:
    """The source checkout this module lives in (``migrator/catalogue/coverage/../../..``)."""
    return Path(__file__).resolve().parents[3]


def data_path(*parts: str) -> Traversable:
    """Return the shipped data file or folder ``parts`` (e.g. ``"op_coverage", "x.json"``).

    Tries ``importlib.resources.files("migrator") / "_data" / *parts`` first (installed
    wheel), then ``<repo root> / *parts`` (source checkout / editable install). The result
    is a :class:`~importlib.resources.abc.Traversable` (a :class:`pathlib.Path` in both
    usual layouts): use ``read_bytes()``, ``iterdir()``, ``is_file()``.

    Raises :class:`FileNotFoundError` naming both places when neither exists.
    """
    if not parts:
        raise ValueError("data_path() needs at least one path component")
    tried: list[str] = []
    try:
        packaged: Traversable = importlib.resources.files("migrator").joinpath("_data")
        for part in parts:
            packaged = packaged.joinpath(part)
        if packaged.is_file() or packaged.is_dir():
            return packaged
        tried.append(str(packaged))
    except (ModuleNotFoundError, TypeError, OSError):  # pragma: no cover - exotic loaders
        tried.append("migrator/_data (package resources unavailable)")
    local = repo_root().joinpath(*parts)
    if local.exists():
        return local
    tried.append(str(local))
    raise FileNotFoundError(
        "ascend-migrate data " + "/".join(parts) + " not found (looked in: " + "; ".join(tried) + ")"
    )
