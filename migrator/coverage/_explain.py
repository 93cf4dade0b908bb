"""``migrate ops NAME...``: JSON-ready answers and a terminal renderer (pure functions)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from ._model import CoverageEntry
from ._table import lookup

__all__ = ["explain", "format_text"]


def explain(names: Iterable[str], soc: str = "A2", version: str | None = None, dtype: object = None) -> list[dict]:
    """One JSON-ready dict per name (``CoverageEntry.to_dict()`` plus ``query``), in order.

    Raises :class:`~migrator.coverage.CoverageError` for an unknown SoC, version or dtype.
    """
    out = []
    for query in names:
        entry = lookup(query, soc=soc, dtype=dtype, version=version)
        record = entry.to_dict()
        record["query"] = query
        out.append(record)
    return out


def _get(entry: CoverageEntry | Mapping, key: str, default=None):
    if isinstance(entry, Mapping):
        return entry.get(key, default)
    return getattr(entry, key, default)


def format_text(entries: Iterable[CoverageEntry | Mapping]) -> str:
    """Plain-text rendering of lookups / :func:`explain` records for a terminal (no colour)."""
    blocks = []
    for entry in entries:
        name = _get(entry, "name")
        status = _get(entry, "status")
        soc = _get(entry, "soc")
        version = _get(entry, "version") or ""
        title = f"{name}: {status} on {soc}"
        if version:
            title += f" (torch-npu {version})"
        if not _get(entry, "known", True):
            title += " [not in the table]"
        dtypes = list(_get(entry, "dtypes") or [])
        dtype_text = ", ".join(dtypes) if dtypes else "not documented"
        if _get(entry, "bf16_undocumented"):
            dtype_text += "  (bf16 undocumented; runs on the NPU)"
        excluded = list(_get(entry, "dtypes_excluded") or [])
        if excluded:
            dtype_text += "  (not: " + ", ".join(excluded) + ")"
        kernel = _get(entry, "kernel") or "unknown"
        aten = _get(entry, "aten")
        kernel_text = f"{kernel} (aten::{aten})" if aten else kernel
        flags = list(_get(entry, "flags") or [])
        rows = [
            ("dtypes", dtype_text),
            ("NPU name", _get(entry, "npu_name") or "-"),
            ("kernel", kernel_text),
            ("flags", ", ".join(flags) if flags else "-"),
        ]
        signature = _get(entry, "signature")
        if signature:
            rows.append(("signature", signature))
        rows.append(("note", _get(entry, "note") or "-"))
        rows.append(("source", _get(entry, "source") or "-"))
        lines = [title] + [f"  {label:<10} {value}" for label, value in rows]
        blocks.append("\n".join(lines))
    return "\n\n".join(blocks) + ("\n" if blocks else "")
