"""Locate data shipped beside the code, for wheels and for source checkouts alike.

Wheels carry the top-level ``op_coverage/*.json`` (and ``rules/``) as
``migrator/_data/op_coverage/...``; an editable install or a plain checkout reads them from
the repository root. :func:`data_path` is the one place that knows both layouts.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import migrator

if TYPE_CHECKING:
    from importlib.resources.abc import Traversable

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
        packaged: Traversable = _package_folder().joinpath("_data")
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


def _package_folder() -> Traversable:
    """`importlib.resources.files("migrator")`: for a package on disk (every usual install) its folder, found
    without importing importlib.resources (zipfile, tempfile, lzma...: a tenth of a short scan's imports)."""
    spec = migrator.__spec__
    if spec is not None and spec.has_location and spec.origin:
        return Path(spec.origin).parent
    import importlib.resources  # pragma: no cover - a zip or another loader

    return importlib.resources.files("migrator")  # pragma: no cover
