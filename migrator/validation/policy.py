"""Each side's effective precision policy, recorded as data and compared (issue 17 item 3).

Child side, :class:`PolicyProbe` during the first training step: whether autocast is on at each
module forward and in which dtype, the dtypes of the activations, of the parameters and of the
grads the optimizer sees (its step pre-hook), plus the GradScaler (class, enabled, scale) from
:func:`execute.train_updates`. Parent side, :func:`compare_policies`: the original's facts against
the migrated's under the same harness policy; every difference warns naming both values (the
numeric checks decide whether it matters). Imports torch only inside the probe.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

CHECK = "precision policy per side (autocast, dtypes, GradScaler)"
AUTOCAST_SHARE_DIFF = 0.5   # autocast on at half the module forwards more (or fewer): the policy changed


class PolicyProbe:
    """Forward hooks on every module plus the optimizer's step pre-hook (see the module docstring)."""

    def __init__(self, model, device: str, optimizer=None) -> None:
        self.model, self.device, self.optimizer = model, device, optimizer
        self.forwards = 0
        self.autocast_on = 0
        self.autocast_dtypes: Counter[str] = Counter()
        self.activations: Counter[str] = Counter()
        self.grads: Counter[str] = Counter()
        self._handles: list = []

    def attach(self) -> PolicyProbe:
        for module in self.model.modules():
            self._handles.append(module.register_forward_pre_hook(self._pre))
            self._handles.append(module.register_forward_hook(self._post))
        return self

    def watch(self, optimizer) -> None:
        self._handles.append(optimizer.register_step_pre_hook(self._opt_pre))

    def detach(self) -> None:
        for h in self._handles:
            h.remove()
        self._handles.clear()

    def _pre(self, module, args) -> None:
        import torch

        self.forwards += 1
        if torch.is_autocast_enabled(self.device):
            self.autocast_on += 1
            self.autocast_dtypes[_name(torch.get_autocast_dtype(self.device))] += 1

    def _post(self, module, args, output) -> None:
        import torch

        outs = output if isinstance(output, (tuple, list)) else (output,)
        for t in outs:
            if isinstance(t, torch.Tensor) and t.is_floating_point():
                self.activations[_name(t.dtype)] += 1

    def _opt_pre(self, optimizer, args, kwargs) -> None:
        if self.grads:
            return
        for group in optimizer.param_groups:
            for p in group["params"]:
                if p.grad is not None:
                    self.grads[_name(p.grad.dtype)] += 1

    def facts(self, model) -> dict[str, Any]:
        params = Counter(_name(p.dtype) for p in model.parameters())
        return {"module_forwards": self.forwards, "autocast_on": self.autocast_on,
                "autocast_dtype": _majority(self.autocast_dtypes), "activation_dtypes": dict(self.activations),
                "param_dtypes": dict(params), "grad_dtypes": dict(self.grads)}


def _name(dtype) -> str:
    return str(dtype).removeprefix("torch.")


def _majority(counts: Counter[str]) -> str | None:
    return counts.most_common(1)[0][0] if counts else None


def _main_dtype(counts: dict[str, int] | None) -> str | None:
    return max(counts.items(), key=lambda kv: kv[1])[0] if counts else None


def describe(facts: dict[str, Any] | None) -> str:
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


def compare_policies(original: dict[str, Any] | None, migrated: dict[str, Any] | None,
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
