"""Each side's effective precision policy, recorded as data and compared (issue 17 item 3).

The child records the facts (:mod:`migrator.validation.child.policy_probe` during the first training
step: autocast at each module forward and its dtype, the dtypes of the activations, of the parameters
and of the grads the optimizer sees, plus the GradScaler). Here, parent side, :func:`compare_policies`
sets the original's facts against the migrated's under the same harness policy, naming both values of
every setting that differs. A changed 16-bit format (fp16 autocast for bf16: per region), a lost GradScaler
and any change of its configuration (init scale, growth factor and interval, backoff, dynamic) or of its
per-step trajectory (scale, skipped steps) fail (issue 24 item 3): they change the training whatever one
step's numerics say. The other differences (autocast coverage, activation / master-weight / grad dtypes)
warn: the numeric checks decide whether they matter. No torch here.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..verdict import Verdict

CHECK = "precision policy per side (autocast, dtypes, GradScaler and its loss scaling)"
AUTOCAST_SHARE_DIFF = 0.5   # autocast on at half the module forwards more (or fewer): the policy changed


def _main_dtype(counts: Mapping[str, int] | None) -> str | None:
    return max(counts.items(), key=lambda kv: kv[1])[0] if counts else None


def _scaler_text(scaler: Mapping[str, Any] | None) -> str:
    if not scaler:
        return "no GradScaler"
    text = f"{scaler['class']} {'on' if scaler.get('enabled') else 'off'}"
    if not scaler.get("enabled"):
        return text
    settings = [f"{key} {scaler[key]:g}" for key in SCALER_SETTINGS if isinstance(scaler.get(key), (int, float))]
    if not scaler.get("dynamic", True):
        settings.append("static")
    return text + (f" ({', '.join(settings)})" if settings else "")


SCALER_SETTINGS = ("init_scale", "growth_factor", "growth_interval", "backoff_factor")


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
    if "scaler" not in facts:
        return ", ".join(parts)
    parts.append(_scaler_text(facts.get("scaler")))
    return ", ".join(parts)


def _region_diffs(po: Mapping[str, Any], pm: Mapping[str, Any]) -> tuple[list[str], list[str]]:
    """(fails, warns) per autocast region: another 16-bit format fails, autocast on/off only warns."""
    ro, rm = po.get("autocast_regions") or {}, pm.get("autocast_regions") or {}
    fails: list[str] = []
    warns: list[str] = []
    for module in ro:
        if module not in rm or ro[module] == rm[module]:
            continue
        text = f"{module}: autocast {rm[module]} (migrated) vs {ro[module]} (original)"
        (fails if "off" not in (ro[module], rm[module]) else warns).append(text)
    return fails, warns


def _scaler_diffs(so: Mapping[str, Any] | None, sm: Mapping[str, Any] | None) -> tuple[list[str], list[str]]:
    """(fails, warns) of the loss scalers: lost, switched off, any setting, the trajectory."""
    on_o, on_m = bool(so and so.get("enabled")), bool(sm and sm.get("enabled"))
    if on_o and not on_m:
        return [f"GradScaler lost: {_scaler_text(sm)} (migrated) vs {_scaler_text(so)} (original)"], []
    if on_m and not on_o:
        return [], [f"GradScaler only on the migrated side: {_scaler_text(sm)} vs {_scaler_text(so)} (original)"]
    if not (on_o and on_m and so and sm):
        return [], []
    fails = [f"GradScaler {key} {_num(sm.get(key))} (migrated) vs {_num(so.get(key))} (original)"
             for key in (*SCALER_SETTINGS, "dynamic") if so.get(key) != sm.get(key)]
    if not fails:  # same settings: the same grads give the same trajectory
        if so.get("skipped_steps") != sm.get("skipped_steps"):
            fails.append(f"GradScaler skipped steps {sm.get('skipped_steps')} (migrated) vs "
                         f"{so.get('skipped_steps')} (original)")
        elif so.get("trajectory") != sm.get("trajectory"):
            fails.append(f"GradScaler scale per step {sm.get('trajectory')} (migrated) vs {so.get('trajectory')} "
                         "(original)")
    return fails, []


def _fp16(policy: Mapping[str, Any]) -> bool:
    return policy.get("autocast_dtype") == "float16" or "float16" in (policy.get("autocast_regions") or {}).values()


def _num(v: Any) -> str:
    return f"{v:g}" if isinstance(v, float) else str(v)


def compare_policies(original: Mapping[str, Any] | None, migrated: Mapping[str, Any] | None,
                     label: str) -> dict[str, Any] | None:
    """The check row for one harness policy (``label``: fp32 / bf16); None when a side has no facts."""
    if not original or not migrated:
        return None
    po, pm = original.get("policy") or {}, migrated.get("policy") or {}
    fails: list[str] = []
    warns: list[str] = []
    if po.get("autocast_dtype") and pm.get("autocast_dtype") and po["autocast_dtype"] != pm["autocast_dtype"]:
        fails.append(f"autocast dtype {pm['autocast_dtype']} (migrated) vs {po['autocast_dtype']} (original)")
    region_fails, region_warns = _region_diffs(po, pm)
    if region_fails and not fails:  # one region in another format (the main dtype is the same)
        fails.append(f"autocast dtype per region: {'; '.join(region_fails[:3])}")
    share_o = po.get("autocast_on", 0) / max(po.get("module_forwards", 0), 1)
    share_m = pm.get("autocast_on", 0) / max(pm.get("module_forwards", 0), 1)
    if abs(share_o - share_m) >= AUTOCAST_SHARE_DIFF:
        warns.append(f"autocast on at {pm.get('autocast_on', 0)}/{pm.get('module_forwards', 0)} module forwards "
                     f"(migrated) vs {po.get('autocast_on', 0)}/{po.get('module_forwards', 0)} (original)")
    elif region_warns:
        warns.append(f"autocast per region: {'; '.join(region_warns[:3])}")
    for key, what in (("activation_dtypes", "activations"), ("param_dtypes", "params (master weights)"),
                      ("grad_dtypes", "grads")):
        a, b = _main_dtype(pm.get(key)), _main_dtype(po.get(key))
        if a and b and a != b:
            warns.append(f"{what} mostly {a} (migrated) vs {b} (original)")
    so, sm = original.get("scaler"), migrated.get("scaler")
    scaler_fails, scaler_warns = _scaler_diffs(so, sm)
    fails += scaler_fails
    warns += scaler_warns
    if _fp16(pm) and not _fp16(po) and not (sm and sm.get("enabled")) and "scaler" in migrated:
        fails.append("fp16 autocast without a GradScaler (migrated): fp16 grads underflow without loss scaling")
    diffs = fails + warns
    return {"check": f"{CHECK}, {label} run", "status": Verdict.FAIL if fails else (Verdict.WARN if warns else Verdict.PASS),
            "metric": "differences", "worst": float(len(diffs)), "threshold": 0.0,
            "message": "; ".join(diffs) if diffs else f"both: {describe(migrated)}",
            "original": describe(original), "migrated": describe(migrated)}
