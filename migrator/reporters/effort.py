"""The effort model of the report: a deliberately simple, explicit estimate for manual findings.

    minutes(finding) = MINUTES[family] x SEVERITY_FACTOR[severity]      (manual findings only)

Op-coverage findings (family `coverage`) count once per distinct op and rule, not per call site:
an op's dtype limits or workaround are worked out once. Automatic fixes (exact and numerics) count 0 here: `migrate fix` applies them, and numerics fixes
are checked by `migrate validate` instead; findings a framework route covers (`--route`) count 0 too. The figures are a planning aid for sizing a port
(order of magnitude), not a promise; they are printed in every report next to the total.
"""

from __future__ import annotations

from collections.abc import Iterable

from migrator.model import FAMILIES, Finding

MINUTES = {
    "device": 15,  # a device/runtime call with no direct counterpart: pick the NPU API, retest
    "distributed": 30,  # process groups, DataParallel -> DDP, launcher changes
    "amp": 15,
    "apex": 45,  # replacing an Apex component and checking its defaults
    "attention": 60,  # rewriting an attention call (masks, layouts, dropout) and checking numerics
    "kernels": 240,  # a custom CUDA/Triton kernel or CUDA-only library: port or replace it
    "environment": 10,  # an environment variable, launch script or requirement line
    "coverage": 30,  # an op without (full) NPU support: find a workaround, measure it
    "meta": 5,  # unreadable file, suppression housekeeping
}
PER_DISTINCT_OP = "coverage"
SEVERITY_FACTOR = {"error": 2.0, "warning": 1.0, "info": 0.25}


def minutes(finding: Finding) -> float:
    if finding.fix is not None or (finding.route is not None and finding.route.absorbs):
        return 0.0  # a framework route (--route) covers it: nothing to do but set the route up
    return MINUTES.get(finding.family, 15) * SEVERITY_FACTOR.get(finding.severity, 1.0)


def total(findings: Iterable[Finding]) -> float:
    seen: set[tuple[str, str]] = set()
    out = 0.0
    for f in findings:
        if f.family == PER_DISTINCT_OP:
            if (f.code, f.symbol) in seen:
                continue
            seen.add((f.code, f.symbol))
        out += minutes(f)
    return out


def human(mins: float) -> str:
    """`45 min`, `2.5 h`, `3 d` (8-hour days) - rounded, for a planning figure."""
    if mins <= 0:
        return "0 min"
    if mins < 60:
        return f"{round(mins)} min"
    hours = mins / 60
    if hours < 16:
        return f"{round(hours * 2) / 2:g} h"
    return f"{round(hours / 8 * 2) / 2:g} d"


def model_rows() -> list[dict]:
    """The model as table rows, for the report's "how the estimate is made" section."""
    return [
        {
            "family": fam,
            "minutes": MINUTES[fam],
            "error": MINUTES[fam] * SEVERITY_FACTOR["error"],
            "warning": MINUTES[fam] * SEVERITY_FACTOR["warning"],
            "info": MINUTES[fam] * SEVERITY_FACTOR["info"],
        }
        for fam in FAMILIES
    ]


MODEL_TEXT = (
    "Effort is estimated for manual findings only (no automatic fix): minutes per finding by family "
    "(device 15, distributed 30, amp 15, apex 45, attention 60, kernels 240, environment 10, "
    "coverage 30, meta 5) times a severity factor (error x2, warning x1, info x0.25); op-coverage "
    "findings count once per distinct op, not per call site. Automatic fixes count 0 (`migrate fix` applies them; numerics fixes are checked with `migrate validate`). "
    "h = hours, d = 8-hour days. A planning aid for the order of magnitude, not a promise."
)
