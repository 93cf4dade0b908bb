"""Randomness handled, not hoped (issue 24 item 4, parent side): the dropout each side applies, compared.

The child (:mod:`migrator.validation.child.dropout`) finds every dropout site (module, functional call,
fused op) in one forward in train mode after ``make_model(dropout=0.0)``. When the original applies any, the
numeric runs of both sides ran with dropout neutralised (the report says so) and a statistical check with
dropout on compares, over :data:`~migrator.validation.child.dropout.SEEDS` seeds: the sites and their rates
(equal), the keep rate of each element-wise dropout and the loss mean (within ``Z`` standard errors). Where
the migrated side's dropout can neither be neutralised nor measured (a real torch_npu's fused ops do not
report it) the verdict is "not comparable", never pass or fail. No torch here.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from ...facts import CheckRow, DropoutFacts, DropoutStatistics
from ...verdict import Verdict

CHECK = "randomness: dropout sites and rates, statistics over seeds with dropout on"
NOT_COMPARABLE = Verdict.NOT_COMPARABLE
Z = 4.0  # standard errors: ~6e-5 false alarms per comparison for a normal statistic
NO_STATISTICS = DropoutStatistics()


def _sites(sites: Mapping[str, tuple[float, ...]]) -> str:
    items = [f"{s} p={'/'.join(f'{r:g}' for r in rates)}" for s, rates in sites.items()]
    return ", ".join(items[:5]) + (" ..." if len(items) > 5 else "")


def _row(status: Verdict, message: str) -> CheckRow:
    return {"check": CHECK, "status": status, "message": message}


def _moments(values: list[float]) -> tuple[float, float]:
    n = len(values)
    mean = sum(values) / n
    var = sum((v - mean) ** 2 for v in values) / (n - 1) if n > 1 else 0.0
    return mean, var


def dropout_check(original: DropoutFacts, migrated: DropoutFacts, real_npu: bool = False,
                  script: bool = False) -> tuple[CheckRow | None, list[str]]:
    """(the check row, notes) from each side's ``SideStatus.dropout``; (None, []) when neither applies dropout.
    ``script``: script mode, where every run had dropout neutralised and no statistics exist (sites only)."""
    so, sm = original.sites, migrated.sites
    if not so and not sm:
        return None, []
    if not so and script:
        return _row(Verdict.FAIL, f"dropout on the migrated side only: {_sites(sm)} (the original script applies none)"), [
            "dropout neutralised on both sides in every run of the script"]
    if not so:  # the numeric runs were not neutralised: they see it too; this names the cause
        return _row(Verdict.FAIL, f"dropout on the migrated side only: {_sites(sm)} (the original applies none after "
                            "make_model(dropout=0.0))"), []
    stats_o, stats_m = original.statistics or NO_STATISTICS, migrated.statistics or NO_STATISTICS
    seeds = len(stats_o.losses)
    notes = [f"dropout active after make_model(dropout=0.0) ({_sites(so)}): neutralised on both sides for the "
             f"numeric checks; compared by statistics over {seeds} seeds with dropout on"] if not script else [
             f"the script's dropout ({_sites(so)}) neutralised on both sides in every run; compared by sites and "
             "rates (the statistical check with dropout on needs the validate.py protocol)"]
    if not sm and real_npu:
        return _row(NOT_COMPARABLE, f"not comparable: the original applies dropout ({_sites(so)}) and the migrated "
                                    "side runs a real torch_npu whose fused ops neither report nor neutralise it"), notes
    diffs = [f"{site}: p={'/'.join(f'{r:g}' for r in sm.get(site, [])) or 'none'} (migrated) vs "
             f"p={'/'.join(f'{r:g}' for r in rates)} (original)" for site, rates in so.items() if sm.get(site) != rates]
    diffs += [f"{site}: p={'/'.join(f'{r:g}' for r in rates)} (migrated) vs none (original)"
              for site, rates in sm.items() if site not in so]
    if diffs:
        return _row(Verdict.FAIL, f"dropout rate differs: {'; '.join(diffs[:4])}"), notes
    if script:
        return _row(Verdict.PASS, f"same sites and rates ({_sites(so)})"), notes
    lo, lm = list(stats_o.losses), list(stats_m.losses)
    if len(lo) < 2 or len(lm) < 2 or not all(math.isfinite(v) for v in lo + lm):
        return _row(NOT_COMPARABLE, "not comparable: no usable statistics with dropout on "
                                    f"({len(lo)} / {len(lm)} finite losses)"), notes
    problems = []
    for site, (k_o, n_o) in stats_o.kept.items():
        kept_m = stats_m.kept.get(site)
        if not kept_m or not n_o or not kept_m[1]:
            continue
        p_o, p_m = k_o / n_o, kept_m[0] / kept_m[1]
        pooled = (k_o + kept_m[0]) / (n_o + kept_m[1])
        se = math.sqrt(max(pooled * (1 - pooled), 1e-12) * (1 / n_o + 1 / kept_m[1]))
        if abs(p_m - p_o) > Z * se:
            problems.append(f"keep rate at {site} {p_m:.4f} (migrated) vs {p_o:.4f} (original)")
    (mo, vo), (mm, vm) = _moments(lo), _moments(lm)
    se = math.sqrt(vo / len(lo) + vm / len(lm))
    bound = Z * se + 1e-6 * max(abs(mo), 1e-30)
    z = abs(mm - mo) / se if se > 0 else (0.0 if abs(mm - mo) <= bound else math.inf)
    if abs(mm - mo) > bound:
        problems.append(f"loss with dropout on {mm:.5g} ± {math.sqrt(vm):.2g} (migrated) vs {mo:.5g} ± "
                        f"{math.sqrt(vo):.2g} (original), {z:.1f} standard errors")
    detail = f"same sites and rates ({_sites(so)}); loss over {len(lo)} seeds {mm:.5g} (migrated) vs {mo:.5g} (original)"
    row = _row(Verdict.FAIL if problems else Verdict.PASS, "; ".join(problems) if problems else detail)
    row.update({"metric": "standard errors (loss mean)", "worst": z, "threshold": Z})
    return row, notes
