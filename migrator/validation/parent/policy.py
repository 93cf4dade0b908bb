"""Each side's effective precision policy, recorded as data and compared (issue 17 item 3).

The child records the facts (:mod:`migrator.validation.child.policy_probe` during the first training
step: autocast at each module forward and its dtype, the dtypes of the activations, of the parameters
and of the grads the optimizer sees, plus the GradScaler). Here, parent side, :func:`compare_policies`
sets the original's facts against the migrated's under the same harness policy; every difference warns
naming both values (the numeric checks decide whether it matters). No torch here.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

CHECK = "precision policy per side (autocast, dtypes, GradScaler)"
AUTOCAST_SHARE_DIFF = 0.5   # autocast on at half the module forwards more (or fewer): the policy changed


def _main_dtype(counts: Mapping[str, int] | None) -> str | None:
    return max(counts.items(), key=lambda kv: kv[1])[0] if counts else None


def describe(facts: Mapping[str, Any] | None) -> str:
    """One line: ``autocast bfloat16 at 18/20 forwards, activations bfloat16, params float32, ...``."""
    if not facts:
        return "not recorded"
    pol = facts.get("policy") or {}
    n, on = pol.get("module_forwards", 0), pol.get("autocast_on", 0)
    parts = [f"autocast {pol.get('autocast_dtype') or 'off'} at {on}/{n} module forwards" if on else
             f"autocast off ({n} module forwards)",
             f"activations {_main_dtype(pol.get('activation_dtypes')) or '-'}",
             f"params {_main_dtype(pol.get('param_dtypes')) or '-'}",
             f"grads {_main_dtype(pol.get('grad_dtypes')) or '-'}"]
    scaler = facts.get("scaler")
    if "scaler" not in facts:
        return ", ".join(parts)
    parts.append("no GradScaler" if not scaler else
                 f"{scaler['class']} {'on' if scaler.get('enabled') else 'off'}"
                 + (f" (scale {scaler['init_scale']:g})" if scaler.get("init_scale") else ""))
    return ", ".join(parts)


def compare_policies(original: Mapping[str, Any] | None, migrated: Mapping[str, Any] | None,
                     label: str) -> dict[str, Any] | None:
    """The check row for one harness policy (``label``: fp32 / bf16); None when a side has no facts."""
    if not original or not migrated:
        return None
    po, pm = original.get("policy") or {}, migrated.get("policy") or {}
    diffs: list[str] = []
    share_o = po.get("autocast_on", 0) / max(po.get("module_forwards", 0), 1)
    share_m = pm.get("autocast_on", 0) / max(pm.get("module_forwards", 0), 1)
    if abs(share_o - share_m) >= AUTOCAST_SHARE_DIFF:
        diffs.append(f"autocast on at {pm.get('autocast_on', 0)}/{pm.get('module_forwards', 0)} module forwards "
                     f"(migrated) vs {po.get('autocast_on', 0)}/{po.get('module_forwards', 0)} (original)")
    for key, what in (("autocast_dtype", "autocast dtype"),):
        if po.get(key) and pm.get(key) and po[key] != pm[key]:
            diffs.append(f"{what} {pm[key]} (migrated) vs {po[key]} (original)")
    for key, what in (("activation_dtypes", "activations"), ("param_dtypes", "params"), ("grad_dtypes", "grads")):
        a, b = _main_dtype(pm.get(key)), _main_dtype(po.get(key))
        if a and b and a != b:
            diffs.append(f"{what} mostly {a} (migrated) vs {b} (original)")
    so, sm = original.get("scaler"), migrated.get("scaler")
    if bool(so) != bool(sm):
        diffs.append(f"GradScaler {'only on the migrated side' if sm else 'only on the original side'}")
    elif so and sm:
        if bool(so.get("enabled")) != bool(sm.get("enabled")):
            diffs.append(f"GradScaler {'on' if sm.get('enabled') else 'off'} (migrated) vs "
                         f"{'on' if so.get('enabled') else 'off'} (original)")
        elif so.get("init_scale") != sm.get("init_scale"):
            diffs.append(f"GradScaler scale {sm.get('init_scale')} (migrated) vs {so.get('init_scale')} (original)")
    return {"check": f"{CHECK}, {label} run", "status": "warn" if diffs else "pass", "metric": "differences",
            "worst": float(len(diffs)), "threshold": 0.0,
            "message": "; ".join(diffs) if diffs else f"both: {describe(migrated)}",
            "original": describe(original), "migrated": describe(migrated)}
