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

from ...facts import CheckRow, PolicyFacts, PrecisionFacts, ScalerFacts
from ...verdict import Verdict

CHECK = "precision policy per side (autocast, dtypes, GradScaler and its loss scaling)"
AUTOCAST_SHARE_DIFF = 0.5   # autocast on at half the module forwards more (or fewer): the policy changed
NO_POLICY = PolicyFacts()  # a side that recorded no policy reads as one without autocast or dtypes


def _main_dtype(counts: Mapping[str, int] | None) -> str | None:
    return max(counts.items(), key=lambda kv: kv[1])[0] if counts else None


def _scaler_text(scaler: ScalerFacts | None) -> str:
    if not scaler:
        return "no GradScaler"
    text = f"{scaler.class_name} {'on' if scaler.enabled else 'off'}"
    if not scaler.enabled:
        return text
    settings = [f"{key} {value:g}" for key in SCALER_SETTINGS
                if isinstance(value := scaler.setting(key), (int, float)) and not isinstance(value, bool)]
    if scaler.dynamic is False:
        settings.append("static")
    return text + (f" ({', '.join(settings)})" if settings else "")


SCALER_SETTINGS = ("init_scale", "growth_factor", "growth_interval", "backoff_factor")


def describe(facts: PrecisionFacts | None) -> str:
    """One line: ``autocast bfloat16 at 18/20 forwards, activations bfloat16, params float32, ...``."""
    if facts is None:
        return "not recorded"
    pol = facts.policy or NO_POLICY
    n, on = pol.module_forwards, pol.autocast_on
    parts = [f"autocast {pol.autocast_dtype or 'off'} at {on}/{n} module forwards" if on else
             f"autocast off ({n} module forwards)",
             f"activations {_main_dtype(pol.activation_dtypes) or '-'}",
             f"params {_main_dtype(pol.param_dtypes) or '-'}",
             f"grads {_main_dtype(pol.grad_dtypes) or '-'}"]
    if not facts.scaler_recorded:
        return ", ".join(parts)
    parts.append(_scaler_text(facts.scaler))
    return ", ".join(parts)


def _region_diffs(po: PolicyFacts, pm: PolicyFacts) -> tuple[list[str], list[str]]:
    """(fails, warns) per autocast region: another 16-bit format fails, autocast on/off only warns."""
    ro, rm = po.autocast_regions, pm.autocast_regions
    fails: list[str] = []
    warns: list[str] = []
    for module in ro:
        if module not in rm or ro[module] == rm[module]:
            continue
        text = f"{module}: autocast {rm[module]} (migrated) vs {ro[module]} (original)"
        (fails if "off" not in (ro[module], rm[module]) else warns).append(text)
    return fails, warns


def _scaler_diffs(so: ScalerFacts | None, sm: ScalerFacts | None) -> tuple[list[str], list[str]]:
    """(fails, warns) of the loss scalers: lost, switched off, any setting, the trajectory."""
    on_o, on_m = bool(so and so.enabled), bool(sm and sm.enabled)
    if on_o and not on_m:
        return [f"GradScaler lost: {_scaler_text(sm)} (migrated) vs {_scaler_text(so)} (original)"], []
    if on_m and not on_o:
        return [], [f"GradScaler only on the migrated side: {_scaler_text(sm)} vs {_scaler_text(so)} (original)"]
    if not (on_o and on_m and so and sm):
        return [], []
    fails = [f"GradScaler {key} {_num(sm.setting(key))} (migrated) vs {_num(so.setting(key))} (original)"
             for key in (*SCALER_SETTINGS, "dynamic") if so.setting(key) != sm.setting(key)]
    if not fails:  # same settings: the same grads give the same trajectory
        if so.skipped_steps != sm.skipped_steps:
            fails.append(f"GradScaler skipped steps {sm.skipped_steps} (migrated) vs "
                         f"{so.skipped_steps} (original)")
        elif so.trajectory != sm.trajectory:
            fails.append(f"GradScaler scale per step {_listed(sm.trajectory)} (migrated) vs {_listed(so.trajectory)} "
                         "(original)")
    return fails, []


def _listed(values: tuple[float, ...] | None) -> str:
    """As the JSON list the message has always shown (``[65536.0, 32768.0]``)."""
    return str(None if values is None else list(values))


def _fp16(policy: PolicyFacts) -> bool:
    return policy.autocast_dtype == "float16" or "float16" in policy.autocast_regions.values()


def _num(v: float | bool | None) -> str:
    return f"{v:g}" if isinstance(v, float) else str(v)


def compare_policies(original: PrecisionFacts | None, migrated: PrecisionFacts | None,
                     label: str) -> CheckRow | None:
    """The check row for one harness policy (``label``: fp32 / bf16); None when a side has no facts."""
    if original is None or migrated is None:
        return None
    po, pm = original.policy or NO_POLICY, migrated.policy or NO_POLICY
    fails: list[str] = []
    warns: list[str] = []
    if po.autocast_dtype and pm.autocast_dtype and po.autocast_dtype != pm.autocast_dtype:
        fails.append(f"autocast dtype {pm.autocast_dtype} (migrated) vs {po.autocast_dtype} (original)")
    region_fails, region_warns = _region_diffs(po, pm)
    if region_fails and not fails:  # one region in another format (the main dtype is the same)
        fails.append(f"autocast dtype per region: {'; '.join(region_fails[:3])}")
    share_o = po.autocast_on / max(po.module_forwards, 1)
    share_m = pm.autocast_on / max(pm.module_forwards, 1)
    if abs(share_o - share_m) >= AUTOCAST_SHARE_DIFF:
        warns.append(f"autocast on at {pm.autocast_on}/{pm.module_forwards} module forwards "
                     f"(migrated) vs {po.autocast_on}/{po.module_forwards} (original)")
    elif region_warns:
        warns.append(f"autocast per region: {'; '.join(region_warns[:3])}")
    for dtypes_o, dtypes_m, what in ((po.activation_dtypes, pm.activation_dtypes, "activations"),
                                     (po.param_dtypes, pm.param_dtypes, "params (master weights)"),
                                     (po.grad_dtypes, pm.grad_dtypes, "grads")):
        a, b = _main_dtype(dtypes_m), _main_dtype(dtypes_o)
        if a and b and a != b:
            warns.append(f"{what} mostly {a} (migrated) vs {b} (original)")
    so, sm = original.scaler, migrated.scaler
    scaler_fails, scaler_warns = _scaler_diffs(so, sm)
    fails += scaler_fails
    warns += scaler_warns
    if _fp16(pm) and not _fp16(po) and not (sm and sm.enabled) and migrated.scaler_recorded:
        fails.append("fp16 autocast without a GradScaler (migrated): fp16 grads underflow without loss scaling")
    diffs = fails + warns
    return {"check": f"{CHECK}, {label} run", "status": Verdict.FAIL if fails else (Verdict.WARN if warns else Verdict.PASS),
            "metric": "differences", "worst": float(len(diffs)), "threshold": 0.0,
            "message": "; ".join(diffs) if diffs else f"both: {describe(migrated)}",
            "original": describe(original), "migrated": describe(migrated)}
