"""Coverage verdicts for traced ops (standard library only): rows from the child -> `TracedOp`s.

Each distinct (level, op, input dtypes) is looked up in the shipped table exactly as
`migrate ops NAME --soc SOC` does (`status`); the first tensor argument's dtype is then checked
against the documented list (`verdict`, as `lookup(..., dtype=)`), unless the API call ran no ATen
op (metadata only, e.g. `torch.is_complex`: its dtype list is about what it answers). Findings use the OPS rules
(severity from the catalogue): OPS002 unsupported (incl. outside the documented dtypes), OPS003
CPU fallback, OPS006 float64 where the op does not document fp64. Torch-API names count only when
the table lists them (as in `scan`); ATen overloads count when the table's kernel data says CPU
fallback or unsupported, except the CPU backend's own kernel choices (`HOST_KERNEL`). Ops of the setup phase (model construction, data) are recorded, not judged.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from .model import Frame, Site, TracedOp, first_dtype

if TYPE_CHECKING:  # the coverage table is loaded on the first verdict
    from migrator.catalogue.coverage import CoverageEntry

# ATen ops a composite op picks for the CPU backend this run is on (SDPA -> *_for_cpu, oneDNN):
# on the NPU the same API picks its own kernel, so they are recorded but not judged.
HOST_KERNEL = re.compile(r"^aten::(_?mkldnn\w*|\w+_for_cpu(_backward)?)(\.|$)")
HOST_NOTE = ("the CPU backend's kernel choice (this census ran on the CPU): on the NPU the calling API "
             "picks its own kernel, so the API-level verdict applies")
CODES = {"unsupported": "OPS002", "cpu_fallback": "OPS003", "float64": "OPS006"}
JUDGED_PHASES = ("forward", "backward", "optimizer")
_PHRASE = {"unsupported": "not supported", "cpu_fallback": "CPU fallback"}


@lru_cache(maxsize=4096)
def _lookup(name: str, soc: str, version: str | None) -> CoverageEntry:
    from migrator.catalogue.coverage import lookup

    return lookup(name, soc=soc, version=version)


@lru_cache(maxsize=4096)
def _lookup_dtype(name: str, soc: str, version: str | None, dtype: str) -> CoverageEntry | None:
    from migrator.catalogue.coverage import CoverageError, lookup

    try:
        return lookup(name, soc=soc, version=version, dtype=dtype)
    except CoverageError:
        return None  # a dtype the table has no name for (complex, quantized): not checked


@lru_cache(maxsize=1)
def _severities() -> dict[str, str]:
    from migrator.catalogue.loader import load_catalogue

    rules = load_catalogue().rules
    return {code: rules[code].severity for code in CODES.values() if code in rules}


def _judge(level: str, op: str, dtypes: tuple[str, ...], soc: str, version: str | None,
           dispatched: bool) -> tuple[CoverageEntry, str, str, str | None]:
    """(the op's entry, its verdict for the first dtype, the note, the finding kind or None)."""
    base = _lookup(op, soc, version)  # the name `migrate ops` takes
    verdict = base.status
    first = first_dtype(dtypes)
    if first is not None and dispatched and base.status in ("supported", "partial"):
        checked = _lookup_dtype(op, soc, version, first)
        if checked is not None:
            verdict = checked.status
            note = checked.note
        else:
            note = base.note
    else:
        note = base.note
    relevant = base.known or level == "aten"
    kind = None
    if relevant and verdict in ("unsupported", "cpu_fallback"):
        kind = verdict
    elif relevant and "fp64" in dtypes and not _fp64_ok(base):
        kind = "float64"
    return base, verdict, note, kind


def _fp64_ok(entry: CoverageEntry) -> bool:
    if "fp64" in entry.dtypes_excluded or "precision_change" in entry.flags:
        return False
    return "fp64" in entry.dtypes


def _message(op: str, dtypes: tuple[str, ...], kind: str, soc: str, site: Site | None) -> str:
    what = f"`{op}` in {', '.join(dict.fromkeys(dtypes)) or 'no tensor dtype'}"
    problem = ("float64, which the op does not document on " + soc if kind == "float64"
               else f"{_PHRASE[kind]} on {soc}")
    if site is None or site.user is None:
        origin = "runs " if site is None or site.library is None else f"{site.library.function} ({site.library.short()}) runs "
        return f"{origin}{what}: {problem}"
    lead = f"your {site.user.short()} ({site.user.function})"
    if site.library is not None:
        return f"{lead} calls {site.library.function} ({site.library.short()}), which runs {what}: {problem}"
    return f"{lead} runs {what}: {problem}"


def _sites(rows: list[Mapping[str, Any]]) -> tuple[Site, ...]:
    merged: dict[tuple, list] = {}
    for row in rows:
        user, library = Frame.from_json(row.get("user_frame")), Frame.from_json(row.get("library_frame"))
        key = (row["phase"], user, library)
        slot = merged.setdefault(key, [0, row.get("shapes")])
        slot[0] += row["count"]
    sites = [Site(phase, count, user, library, tuple(tuple(s) for s in shapes) if shapes is not None else None)
             for (phase, user, library), (count, shapes) in merged.items()]
    return tuple(sorted(sites, key=lambda s: (s.user is None, s.phase, s.user.path if s.user else "",
                                              s.user.line if s.user else 0, -s.count)))


def judge(rows: Iterable[Mapping[str, Any]], soc: str, version: str | None) -> tuple[TracedOp, ...]:
    """Group the child's rows by (level, op, dtypes) and give each its verdict (and finding)."""
    groups: dict[tuple, list[Mapping[str, Any]]] = {}
    for row in rows:
        groups.setdefault((row["level"], row["op"], tuple(row["dtypes"])), []).append(row)
    severities = _severities()
    out = []
    for (level, op, dtypes), members in sorted(groups.items()):
        if level == "aten" and not op.startswith("aten::"):
            continue  # profiler::, c10d::, custom namespaces: not in the table
        dispatched = any(row.get("dispatched", True) for row in members)  # False: metadata only (is_complex)
        base, verdict, note, kind = _judge(level, op, dtypes, soc, version, dispatched)
        host = bool(HOST_KERNEL.match(op))
        if host:
            kind, note = None, HOST_NOTE
        sites = _sites(members)
        judged = [s for s in sites if s.phase in JUDGED_PHASES]
        code = severity = message = None
        if kind is not None and judged:
            code = CODES[kind]
            severity = severities.get(code, "warning")
            message = _message(op, dtypes, kind, soc, next((s for s in judged if s.user), judged[0]))
        out.append(TracedOp(level, op, dtypes, sum(s.count for s in sites), base.status, verdict, base.kernel,
                            tuple(base.dtypes), base.known, note, sites, dispatched, host, code, severity, message))
    return tuple(out)
