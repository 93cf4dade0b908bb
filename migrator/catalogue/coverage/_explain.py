"""``migrate ops NAME...``: JSON-ready answers and a terminal renderer (pure functions)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from ._model import CoverageEntry
from ._names import DTYPES
from ._table import lookup

__all__ = ["explain", "format_text", "partial_because"]


def partial_because(entry: CoverageEntry | Mapping) -> list[str]:
    """Why an op is "partial": each limit the table holds (argument limits, dtypes outside the
    documented list, excluded dtypes), or a line saying the source names none."""
    out = []
    limits = list(_get(entry, "limits") or [])
    if limits:
        more = _get(entry, "more_limits") or 0
        out.append("argument limits: " + "; ".join(limits) + (f" (and {more} more in the source)" if more else ""))
    dtypes = list(_get(entry, "dtypes") or [])
    if dtypes:
        outside = [d for d in DTYPES if d not in dtypes and not (d == "bf16" and _get(entry, "bf16_undocumented"))]
        if outside:
            out.append("dtypes outside the documented list: " + ", ".join(outside))
    if _get(entry, "bf16_undocumented"):
        out.append("bf16 is not in the documented list, but the NPU kernel exists (a documentation gap)")
    excluded = list(_get(entry, "dtypes_excluded") or [])
    if excluded:
        out.append("dtypes the source excludes: " + ", ".join(excluded))
    return out or ["the support list marks it supported with limits but names none; see the source"]


OP_ALIASES = (("F.", "torch.nn.functional."), ("nn.", "torch.nn."), ("Tensor.", "torch.Tensor."))


def op_name(query: str) -> str:
    """`F.gelu` -> `torch.nn.functional.gelu`, `nn.Linear` -> `torch.nn.Linear`, `Tensor.add` ->
    `torch.Tensor.add` (the spellings of PyTorch code and docs)."""
    for short, full in OP_ALIASES:
        if query.startswith(short):
            return full + query[len(short):]
    return query


def torch_has(name: str) -> bool | None:
    """Whether `name` (dotted, from `torch`) exists in the installed torch; None without torch."""
    import importlib

    parts = name.split(".")
    if parts[0] != "torch":
        return False
    try:
        obj = importlib.import_module("torch")
    except ImportError:
        return None
    for i, part in enumerate(parts[1:], 1):
        if hasattr(obj, part):
            obj = getattr(obj, part)
            continue
        try:
            obj = importlib.import_module(".".join(parts[: i + 1]))
        except ImportError:
            return False
    return True


def explain(names: Iterable[str], soc: str = "A2", version: str | None = None, dtype: object = None,
            check_torch: bool = False) -> list[dict]:
    """One JSON-ready dict per name (``CoverageEntry.to_dict()`` plus ``query``, the name as asked),
    in order; ``F.``/``nn.``/``Tensor.`` expanded; a "partial" entry says why (``partial_because``).
    ``check_torch``: a name the table does not know and the installed torch lacks gets
    ``unknown_api: true`` (torch is imported only for such names).

    Raises :class:`~migrator.catalogue.coverage.CoverageError` for an unknown SoC, version or dtype.
    """
    out = []
    for query in names:
        entry = lookup(op_name(query), soc=soc, dtype=dtype, version=version)
        record = entry.to_dict()
        record["query"] = query
        if entry.status == "partial":
            record["partial_because"] = partial_because(entry)
        if check_torch and not entry.known and record.get("kernel") in (None, "unknown"):
            record["unknown_api"] = torch_has(entry.name) is False
        out.append(record)
    return out


def _get(entry: CoverageEntry | Mapping, key: str, default: object = None) -> Any:  # a field or a record's value
    if isinstance(entry, Mapping):
        return entry.get(key, default)
    return getattr(entry, key, default)


def _rules_text(query: str, rules: list[Mapping]) -> str:
    lines = [f"{query}: not a torch API; covered by rule " + ", ".join(r["code"] for r in rules)]
    for r in rules:
        lines.append(f"  {r['code']:<10} {r['name']} ({r['symbol']}, fix: {r['fix']})")
        lines.append(f"  {'use':<10} {r['replacement'] or '-'}")
        lines.append(f"  {'more':<10} {r['see']}")
    return "\n".join(lines)


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
        query = _get(entry, "query")
        if query and query != name:
            title += f" [asked as {query}]"
        rules = _get(entry, "rules")
        if rules:
            blocks.append(_rules_text(query or name, rules))
            continue
        if _get(entry, "unknown_api"):
            blocks.append(f"{query or name}: unknown API — neither in torch nor in the op-coverage table (check the spelling; "
                          "aliases F., nn. and Tensor. are expanded)")
            continue
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
        if status == "partial":
            for reason in _get(entry, "partial_because") or partial_because(entry):
                rows.append(("partial", reason))
        rows.append(("note", _get(entry, "note") or "-"))
        rows.append(("source", _get(entry, "source") or "-"))
        lines = [title] + [f"  {label:<10} {value}" for label, value in rows]
        blocks.append("\n".join(lines))
    return "\n\n".join(blocks) + ("\n" if blocks else "")
