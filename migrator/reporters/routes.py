"""The route headline every output leads with: framework, version, route, what it covers, what is left.

    megatron-core 0.12.1 → MindSpeed 2.1.0_core_r0.12.1: covers N of M findings (K only with flags …);
    residual R findings, about E

Effort figures come from migrator/reporters/effort.py (covered findings count 0 there).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from migrator.ground.model import Finding

from migrator.ground.model import RunResult
from migrator.reporters import effort


def residual(result: RunResult) -> list[Finding]:
    return [f for f in result.findings if not (f.route and f.route.absorbs)]


def totals(result: RunResult) -> dict:
    """Numbers for JSON `route_summary` and the report (minutes from the effort model)."""
    rest = residual(result)
    unrouted = [f.__class__(**{**f.__dict__, "route": None}) for f in result.findings]
    return {
        "findings": len(result.findings),
        "covered": sum(1 for f in result.findings if f.route and f.route.status == "covered"),
        "gated": sum(1 for f in result.findings if f.route and f.route.status == "gated"),
        "left": sum(1 for f in result.findings if f.route and f.route.status == "left"),
        "residual": len(rest),
        "residual_effort_minutes": effort.total(rest),
        "effort_without_route_minutes": effort.total(unrouted),
    }


def headlines(result: RunResult) -> list[str]:
    """The first screen's route lines: the frameworks production code is built on (or that `--route NAME`
    named), then the residual; empty without --route, detection, or a framework production code shows."""
    shown = [fw for fw in result.frameworks if fw.from_production]
    return _lines(result, shown, with_rest=True) if shown else []


def later_headlines(result: RunResult) -> list[str]:
    """Frameworks found only outside production code (an example's requirements, a test's imports): a note,
    then their route lines, for a section after the findings; empty when there are none."""
    later = [fw for fw in result.frameworks if not fw.from_production]
    if not later:
        return []
    where = "; ".join(f"{fw.framework.name}: {', '.join(fw.roles)} ({', '.join(fw.framework.sources[:3])}"
                      f"{', ...' if len(fw.framework.sources) > 3 else ''})" for fw in later)
    note = (f"note: found only outside production code ({where}), so not shown first; "
            "`[tool.migrate] path-roles` sets a folder's role")
    return [note, *_lines(result, later, with_rest=not any(fw.from_production for fw in result.frameworks))]


def _lines(result: RunResult, frameworks: list, with_rest: bool) -> list[str]:
    t = totals(result)
    rest = (
        f"residual {t['residual']} findings, about {effort.human(t['residual_effort_minutes'])} "
        f"(without the route: {t['findings']} findings, about {effort.human(t['effort_without_route_minutes'])})"
    )
    active = [fw for fw in frameworks if fw.route is not None]
    lines = []
    for fw in frameworks:
        d = fw.framework
        name = f"{d.name} {d.version or '(version unknown)'} [{d.version_source}]"
        if fw.route is None:
            lines.append(f"{name}: no route — {fw.note}")
            continue
        if not (fw.covers or fw.left):  # nothing here relies on the route: one line, no to-do list
            lines.append(f"{name} → {fw.route.title}: covers none of the {t['findings']} findings")
            continue
        gated = f" ({fw.gated} only with flags {', '.join(fw.flags)})" if fw.gated else ""
        left = f"; {fw.left} left non-functional by the route" if fw.left else ""
        tail = f"; {rest}" if len(active) == 1 and with_rest else ""
        lines.append(f"{name} → {fw.route.title}: covers {fw.covers} of {t['findings']} findings{gated}{left}{tail}")
        if fw.note:
            lines.append(f"  note: {fw.note}")
        for req in fw.route.requirements:
            lines.append(f"  you add ({req.kind}): {req.text} — {req.where}")
    if len(active) != 1 and with_rest:
        lines.append(rest)
    return lines


def mark_text(f: Finding) -> str:
    """` — covered by ROUTE (target, source)` for one finding line; empty when no route touched it."""
    m = f.route
    if m is None:
        return ""
    where = f"`{m.target}`, {m.source}"
    if m.status == "covered":
        cond = f"; when {m.condition}" if m.condition else ""
        return f" — covered by {m.route} ({where}{cond})"
    if m.status == "gated":
        return f" — covered by {m.route} only with {m.flag} ({where})"
    return f" — {m.route} leaves it: {m.note} ({where})"
