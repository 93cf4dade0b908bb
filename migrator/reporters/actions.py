"""The report's manual-work sections: actions grouped by rule, info-level notes, optional imports.

Plain data for the templates, built from `migrator.reporters.effort` (which decides what an action is).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from migrator.catalogue.loader import Catalogue
    from migrator.reporters.effort import Action

from collections import defaultdict

from migrator.ground.model import FAMILIES, SEVERITY_RANK, Finding
from migrator.reporters import effort


def rule_anchor(code: str) -> str:
    return f"rule-{code.lower()}"


UNIT_WORDS = {"site": ("site", "sites"), "import": ("file's imports", "files' imports"), "file": ("file", "files"),
              "symbol": ("name", "names"),
              "op": ("distinct op", "distinct ops")}


def manual_groups(actions: list[Action], catalogue: Catalogue) -> list[dict]:
    """Actions grouped by rule, worst severity first: count, minutes each and why (the catalogue's)."""
    by_code: dict[str, list] = defaultdict(list)
    for a in actions:
        by_code[a.code].append(a)

    def order(item: tuple[str, list]) -> tuple:
        code, acts = item
        fam = acts[0].first.family
        return (-max(SEVERITY_RANK[f.severity] for a in acts for f in a.findings),
                FAMILIES.index(fam) if fam in FAMILIES else 99, code)

    groups = []
    for code, acts in sorted(by_code.items(), key=order):
        rule = catalogue.get(code)
        sites = sorted((f for a in acts for f in a.findings), key=lambda f: (f.path, f.cell or 0, f.line, f.column))
        mins = sum(a.minutes for a in acts)
        each = effort.human(acts[0].minutes)
        one, many = UNIT_WORDS[acts[0].unit]
        note = f"{len(acts)} {one if len(acts) == 1 else many} × {each} = {effort.human(mins)}"
        if len({a.minutes for a in acts}) > 1:  # sites with their own figures (CUDA files by their kernels)
            note = f"{len(acts)} {many} = {effort.human(mins)}, each by its own size"
        if len(sites) != len(acts):
            note += f" ({len(sites)} findings)"
        groups.append(
            {
                "code": code,
                "name": sites[0].name,
                "family": sites[0].family,
                "severity": max((f.severity for f in sites), key=lambda v: SEVERITY_RANK[v]),
                "count": len(acts),
                "minutes": mins,
                "effort": effort.human(mins),
                "each": each,
                "effort_note": note,
                "effort_why": effort.rule_minutes(code)[1],
                "use_instead": rule.docs.use_instead if rule else "",
                "anchor": rule_anchor(code),
                "sites": sites,
            }
        )
    return groups


def note_groups(notes: list[Finding]) -> list[dict]:
    """Info-level notes by rule (no effort): shown collapsed, a few examples each."""
    by_code: dict[str, list[Finding]] = defaultdict(list)
    for f in sorted(notes, key=lambda f: (f.path, f.cell or 0, f.line, f.column)):
        by_code[f.code].append(f)
    return [
        {"code": code, "name": fs[0].name, "family": fs[0].family, "count": len(fs), "anchor": rule_anchor(code),
         "distinct": len({f.symbol for f in fs}), "examples": fs[:5], "more": max(0, len(fs) - 5)}
        for code, fs in sorted(by_code.items())
    ]


def optional_imports(found: list[Finding]) -> list[dict]:
    """Guarded imports (try/except ImportError with a fallback) per library: files and sites."""
    by_library: dict[str, list[Finding]] = defaultdict(list)
    for f in found:
        by_library[f.imported.library if f.imported else "?"].append(f)
    return [
        {"library": lib, "count": len(fs), "files": len({f.path for f in fs}), "codes": sorted({f.code for f in fs}),
         "examples": fs[:5], "more": max(0, len(fs) - 5)}
        for lib, fs in sorted(by_library.items())
    ]


def advice_groups(advice: list[Finding], catalogue: Catalogue) -> list[dict]:
    """Advice on speed (fusion, perf) by rule, warnings first: count, files, what to use instead, every site."""
    by_code: dict[str, list[Finding]] = defaultdict(list)
    for f in sorted(advice, key=lambda f: (f.path, f.cell or 0, f.line, f.column)):
        by_code[f.code].append(f)

    def order(item: tuple[str, list[Finding]]) -> tuple:
        code, fs = item
        return (-max(SEVERITY_RANK[f.severity] for f in fs), code)

    groups = []
    for code, fs in sorted(by_code.items(), key=order):
        rule = catalogue.get(code)
        groups.append({"code": code, "name": fs[0].name, "family": fs[0].family, "anchor": rule_anchor(code),
                       "severity": max((f.severity for f in fs), key=lambda v: SEVERITY_RANK[v]),
                       "count": len(fs), "files": len({f.path for f in fs}),
                       "use_instead": rule.docs.use_instead if rule else "", "sites": fs})
    return groups
