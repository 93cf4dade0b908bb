"""Child side of the precision-policy check: what autocast, the activations, the parameters and the
grads the optimizer sees are, during the first training step (the parent compares the facts,
:mod:`migrator.validation.parent.comparison.policy`). Imports torch only inside the probe."""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch

from . import passthrough


class PolicyProbe:
    """Forward hooks on every module plus the optimizer's step pre-hook (see the module docstring)."""

    def __init__(self, model: torch.nn.Module, device: str, optimizer: torch.optim.Optimizer | None = None) -> None:
        self.model, self.device, self.optimizer = model, device, optimizer
        self.forwards = 0
        self.autocast_on = 0
        self.autocast_dtypes: Counter[str] = Counter()
        self.activations: Counter[str] = Counter()
        self.grads: Counter[str] = Counter()
        self.regions: dict[str, str] = {}  # module path -> autocast dtype at its first call ("off")
        self._names = {id(m): n or "_root" for n, m in model.named_modules()}
        self._handles: list[torch.utils.hooks.RemovableHandle] = []

    def attach(self) -> PolicyProbe:
        for module in self.model.modules():
            self._handles.append(module.register_forward_pre_hook(self._pre))
            self._handles.append(module.register_forward_hook(self._post))
        return self

    def watch(self, optimizer: torch.optim.Optimizer) -> None:
        self._handles.append(optimizer.register_step_pre_hook(self._opt_pre))

    def detach(self) -> None:
        for h in self._handles:
            h.remove()
        self._handles.clear()

    def _pre(self, module: torch.nn.Module, args: tuple[Any, ...]) -> None:
        import torch

        self.forwards += 1
        state = "off"
        if torch.is_autocast_enabled(self.device):
            self.autocast_on += 1
            state = _name(torch.get_autocast_dtype(self.device))
            self.autocast_dtypes[state] += 1
        self.regions.setdefault(self._names.get(id(module), type(module).__name__), state)

    def _post(self, module: torch.nn.Module, args: tuple[Any, ...], output: Any) -> None:
        import torch

        outs = output if isinstance(output, (tuple, list)) else (output,)
        for t in outs:
            if isinstance(t, torch.Tensor) and t.is_floating_point():
                self.activations[_name(t.dtype)] += 1

    def _opt_pre(self, optimizer: torch.optim.Optimizer, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        if self.grads:
            return
        for group in optimizer.param_groups:
            for p in group["params"]:
                if p.grad is not None:
                    self.grads[_name(p.grad.dtype)] += 1

    def facts(self, model: torch.nn.Module) -> dict[str, Any]:
        params = Counter(_name(p.dtype) for p in model.parameters())
        return {"module_forwards": self.forwards, "autocast_on": self.autocast_on,
                "autocast_dtype": _majority(self.autocast_dtypes), "activation_dtypes": dict(self.activations),
                "param_dtypes": dict(params), "grad_dtypes": dict(self.grads), "autocast_regions": dict(self.regions)}


def _name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


def _majority(counts: Counter[str]) -> str | None:
    return counts.most_common(1)[0][0] if counts else None


# ------------------------------------------------------------------------------ loss scaling
SCALER_SETTINGS = (("init_scale", "_init_scale"), ("growth_factor", "_growth_factor"),
                   ("backoff_factor", "_backoff_factor"), ("growth_interval", "_growth_interval"))


def scaler_config(scaler: Any) -> dict[str, Any] | None:
    """The loss scaler's configuration (None: no scaler): class, on/off, and when on its init scale, growth
    factor and interval, backoff factor and whether it is dynamic (torch's always is; torch_npu's may not be)."""
    if scaler is None:
        return None
    enabled = bool(scaler.is_enabled()) if hasattr(scaler, "is_enabled") else True
    config: dict[str, Any] = {"class": type(scaler).__name__, "enabled": enabled}
    if enabled:
        for key, attr in SCALER_SETTINGS:
            value = getattr(scaler, attr, None)
            if isinstance(value, (int, float)):
                config[key] = float(value)
        config["dynamic"] = bool(getattr(scaler, "_dynamic", True))
    return config


def current_scale(scaler: Any) -> float | None:
    if scaler is None or not getattr(scaler, "is_enabled", lambda: True)():
        return None
    try:
        return float(scaler.get_scale())
    except Exception:  # noqa: BLE001 - a scaler without get_scale: not recorded
        return None


class ScalerTrajectory:
    """Per optimizer step: the scale after ``update()`` and the steps skipped (the scale backed off: inf/NaN
    grads). Fed by :meth:`after_update`; ``facts()`` merges it into the scaler's configuration."""

    def __init__(self) -> None:
        self.config: dict[str, Any] | None = None
        self.scales: list[float] = []
        self.skipped = 0

    def seen(self, scaler: Any) -> None:
        if self.config is None:
            self.config = scaler_config(scaler)

    def after_update(self, scaler: Any, before: float | None) -> None:
        self.seen(scaler)
        after = current_scale(scaler)
        if after is None:
            return
        self.scales.append(after)
        if before is not None and after < before:
            self.skipped += 1

    def facts(self) -> dict[str, Any] | None:
        if self.config is None:
            return None
        return dict(self.config, trajectory=list(self.scales), skipped_steps=self.skipped)


def patch_grad_scaler(trajectory: ScalerTrajectory, unscaled: dict[int, Any], patches: list[tuple[Any, str, Any]]) -> None:
    """Script mode: every ``GradScaler`` (torch's, the device remap's, the emulation's: they share
    ``torch.amp.GradScaler.scale`` / ``update``) reports to ``trajectory``; ``scale(loss)`` remembers the
    unscaled loss by the id of what it returns, so the loss recorded at ``backward()`` is the unscaled one."""
    import torch

    cls = torch.amp.GradScaler
    real_scale, real_update = cls.scale, cls.update

    def scale(self: torch.amp.GradScaler, outputs: Any) -> Any:
        trajectory.seen(self)
        result = passthrough.call(real_scale, self, outputs)
        if isinstance(outputs, torch.Tensor) and isinstance(result, torch.Tensor):
            unscaled.clear()  # only the latest scaled loss is live
            unscaled[id(result)] = outputs
        return result

    def update(self: torch.amp.GradScaler, new_scale: float | torch.Tensor | None = None) -> None:
        before = current_scale(self)
        passthrough.call(real_update, self, new_scale)
        trajectory.after_update(self, before)

    cls.scale = scale  # type: ignore[method-assign]
    cls.update = update  # type: ignore[method-assign]
    patches.extend([(cls, "scale", real_scale), (cls, "update", real_update)])
