"""Child side of the precision-policy check: what autocast, the activations, the parameters and the
grads the optimizer sees are, during the first training step (the parent compares the facts,
:mod:`migrator.validation.parent.policy`). Imports torch only inside the probe."""

from __future__ import annotations

from collections import Counter
from typing import Any


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
