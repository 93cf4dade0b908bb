"""Emulated ``torch_npu.optim`` fused optimizers (ascend-facts §d, optimizer table).

The real classes (``torch_npu/optim/npu_fused_*.py``) flatten all parameters of one dtype into a
single buffer and run the update on it. The arithmetic is written out here per parameter, in the
same order of in-place operations, so results match the flattened update for parameters that get
a gradient every step. Behaviour kept from the real base class (``npu_fused_optim_base.py``):

* parameters with a gradient must be **float32 or float16** — bf16 (or fp64) raises ``TypeError``
  like on the device ("Fused optimizer's parameters must be either float32 or float16");
* ``zero_grad()`` defaults to ``set_to_none=False`` and ``set_to_none=True`` raises ``ValueError``;
* ``clip_grad_norm_fused_(max_norm, norm_type=2)`` clips all gradients by ``max_norm / (total + 1e-6)``
  and returns the total norm;
* sparse gradients raise ``RuntimeError``.

Not emulated: the flat-buffer aliasing (``p.grad`` being a view into one combined tensor) and the
per-(group, dtype) shared step counter (the counter here is per parameter; identical when every
parameter receives a gradient on every step).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from typing import Any

import torch
from torch import inf
from torch.optim.optimizer import Optimizer, required

_FUSED_DTYPES = (torch.float32, torch.float16)


class NpuFusedOptimizerBase(Optimizer):
    """Emulated ``torch_npu.optim.NpuFusedOptimizerBase`` (ascend-facts §d; see module docstring)."""

    def __init__(self, params: Iterable, defaults: dict) -> None:
        super().__init__(params, defaults)
        self.is_fused_optimizer = True

    def _params_with_grad(self, group: dict) -> list:
        out = []
        for p in group["params"]:
            if p.grad is None:
                continue
            if p.grad.is_sparse:
                raise RuntimeError(f"{type(self).__name__} does not support sparse gradients, "
                                   "please consider SparseAdam instead")
            out.append(p)
        return out

    def _check_dtypes(self) -> None:
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is not None and p.dtype not in _FUSED_DTYPES:
                    raise TypeError("Fused optimizer's parameters must be either float32 or float16, but received "
                                    f"{p.dtype} (torch_npu emulation, ascend-facts §d)")

    def _group_step(self, group: dict) -> None:  # pragma: no cover - abstract
        raise NotImplementedError

    def _before_step(self) -> None:
        """Hook for whole-optimizer work done before the per-group updates (Lamb's global norm)."""

    @torch.no_grad()
    def step(self, closure: Callable[[], Any] | None = None) -> Any:
        """One update of every parameter group (ascend-facts §d)."""
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        self._check_dtypes()
        self._before_step()
        for group in self.param_groups:
            self._group_step(group)
        return loss

    def zero_grad(self, set_to_none: bool = False) -> None:
        """Emulated fused ``zero_grad`` (§d): zeroes in place; ``set_to_none=True`` raises like torch_npu."""
        if set_to_none:
            raise ValueError("set_to_none is not supported in fused optimizers")
        super().zero_grad(set_to_none=False)

    @torch.no_grad()
    def clip_grad_norm_fused_(self, max_norm: float, norm_type: float = 2) -> torch.Tensor:
        """Emulated ``clip_grad_norm_fused_`` (§d, ``npu_fused_optim_base.py``): fp32 total norm of all
        gradients; if ``max_norm / (total + 1e-6) < 1`` every gradient is multiplied by it."""
        grads = [p.grad for g in self.param_groups for p in g["params"] if p.grad is not None]
        if not grads:
            return torch.tensor(0.0)
        max_norm, norm_type = float(max_norm), float(norm_type)
        if norm_type == inf:
            total = torch.stack([g.float().abs().max() for g in grads]).max()
        else:
            total = torch.stack([g.float().abs().pow(norm_type).sum() for g in grads]).sum().pow(1.0 / norm_type)
        clip_coef = max_norm / (total + 1e-6)
        if clip_coef < 1:
            for g in grads:
                g.mul_(clip_coef.to(g.dtype))
        return total


def _check_adam_args(lr: float, betas: tuple, eps: float, weight_decay: float) -> None:
    if lr < 0.0:
        raise ValueError(f"Invalid learning rate: {lr}")
    if eps < 0.0:
        raise ValueError(f"Invalid epsilon value: {eps}")
    if not 0.0 <= betas[0] < 1.0:
        raise ValueError(f"Invalid beta parameter at index 0: {betas[0]}")
    if not 0.0 <= betas[1] < 1.0:
        raise ValueError(f"Invalid beta parameter at index 1: {betas[1]}")
    if weight_decay < 0.0:
        raise ValueError(f"Invalid weight_decay value: {weight_decay}")


class _AdamFamily(NpuFusedOptimizerBase):
    _decoupled = True

    def __setstate__(self, state: dict) -> None:
        super().__setstate__(state)
        for group in self.param_groups:
            group.setdefault("amsgrad", False)

    def _group_step(self, group: dict) -> None:
        lr, wd, eps, amsgrad = group["lr"], group["weight_decay"], group["eps"], group["amsgrad"]
        beta1, beta2 = group["betas"]
        for p in self._params_with_grad(group):
            grad = p.grad
            state = self.state[p]
            if len(state) == 0:
                state["step"] = 0
                state["exp_avg"] = torch.zeros_like(p, memory_format=torch.preserve_format)
                state["exp_avg_sq"] = torch.zeros_like(p, memory_format=torch.preserve_format)
                if amsgrad:
                    state["max_exp_avg_sq"] = torch.zeros_like(p, memory_format=torch.preserve_format)
            state["step"] += 1
            step = state["step"]
            if self._decoupled:
                p.mul_(1 - lr * wd)
            elif wd != 0:
                grad = grad.add(p, alpha=wd)
            exp_avg, exp_avg_sq = state["exp_avg"], state["exp_avg_sq"]
            bias_correction1 = 1 - beta1 ** step
            bias_correction2 = 1 - beta2 ** step
            exp_avg.mul_(beta1).add_(grad, alpha=1 - beta1)
            exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
            if amsgrad:
                max_exp_avg_sq = state["max_exp_avg_sq"]
                torch.max(max_exp_avg_sq, exp_avg_sq, out=max_exp_avg_sq)
                denom = (max_exp_avg_sq.sqrt() / math.sqrt(bias_correction2)).add_(eps)
            else:
                denom = (exp_avg_sq.sqrt() / math.sqrt(bias_correction2)).add_(eps)
            p.addcdiv_(exp_avg, denom, value=-lr / bias_correction1)


class NpuFusedAdamW(_AdamFamily):
    """Emulated ``torch_npu.optim.NpuFusedAdamW`` (ascend-facts §d).

    Defaults ``lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2, amsgrad=False``;
    decoupled decay ``p *= 1 - lr·wd``, then bias-corrected Adam:
    ``p -= lr/bc1 · m / (sqrt(v)/sqrt(bc2) + eps)``.
    """

    _decoupled = True

    def __init__(self, params: Iterable, lr: float = 1e-3, betas: tuple = (0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 1e-2, amsgrad: bool = False) -> None:
        _check_adam_args(lr, betas, eps, weight_decay)
        super().__init__(params, dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay, amsgrad=amsgrad))


class NpuFusedAdam(_AdamFamily):
    """Emulated ``torch_npu.optim.NpuFusedAdam`` (ascend-facts §d).

    Defaults ``lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0, amsgrad=False``; **L2** decay
    ``grad += wd·p`` before the moments; bias-corrected.
    """

    _decoupled = False

    def __init__(self, params: Iterable, lr: float = 1e-3, betas: tuple = (0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 0, amsgrad: bool = False) -> None:
        _check_adam_args(lr, betas, eps, weight_decay)
        super().__init__(params, dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay, amsgrad=amsgrad))


class NpuFusedSGD(NpuFusedOptimizerBase):
    """Emulated ``torch_npu.optim.NpuFusedSGD`` (ascend-facts §d).

    ``lr`` required; ``momentum=0, dampening=0, weight_decay=0, nesterov=False``. ``d = g + wd·p``;
    with momentum the first buffer is ``d`` itself, then ``buf = m·buf + (1-dampening)·d``;
    nesterov uses ``d + m·buf``; ``p -= lr·d``.
    """

    def __init__(self, params: Iterable, lr: Any = required, momentum: float = 0.0, dampening: float = 0.0,
                 weight_decay: float = 0.0, nesterov: bool = False) -> None:  # lr: a float or torch's `required`
        if lr is not required and lr < 0.0:
            raise ValueError(f"Invalid learning rate: {lr}")
        if momentum < 0.0:
            raise ValueError(f"Invalid momentum value: {momentum}")
        if weight_decay < 0.0:
            raise ValueError(f"Invalid weight_decay value: {weight_decay}")
        if nesterov and (momentum <= 0.0 or not math.isclose(dampening, 0.0, abs_tol=1e-15)):
            raise ValueError("Nesterov momentum requires a momentum and zero dampening")
        super().__init__(params, dict(lr=lr, momentum=momentum, dampening=dampening,
                                      weight_decay=weight_decay, nesterov=nesterov))

    def __setstate__(self, state: dict) -> None:
        super().__setstate__(state)
        for group in self.param_groups:
            group.setdefault("nesterov", False)

    def _group_step(self, group: dict) -> None:
        wd, momentum, dampening, nesterov = (group["weight_decay"], group["momentum"], group["dampening"],
                                             group["nesterov"])
        for p in self._params_with_grad(group):
            d_p = p.grad
            if wd != 0:
                d_p = d_p.add(p, alpha=wd)
            if momentum != 0:
                state = self.state[p]
                if "momentum_buffer" not in state:
                    buf = state["momentum_buffer"] = torch.clone(d_p).detach()
                else:
                    buf = state["momentum_buffer"]
                    buf.mul_(momentum).add_(d_p, alpha=1 - dampening)
                d_p = d_p.add(buf, alpha=momentum) if nesterov else buf
            p.add_(d_p, alpha=-group["lr"])


class NpuFusedLamb(NpuFusedOptimizerBase):
    """Emulated ``torch_npu.optim.NpuFusedLamb`` (ascend-facts §d).

    Defaults ``lr=1e-3, betas=(0.9, 0.999), eps=1e-6, weight_decay=0, adam=False,
    use_global_grad_norm=False``. **No bias correction**: ``u = m / (sqrt(v) + eps) + wd·p``;
    per parameter ``trust = clamp(‖p‖, 0, 10) / ‖u‖`` (1 if either norm is 0, always 1 with
    ``adam=True``); ``p -= lr · trust · u``. With ``use_global_grad_norm`` the gradients are divided
    by the global gradient L2 norm when it exceeds 1.
    """

    def __init__(self, params: Iterable, lr: float = 1e-3, betas: tuple = (0.9, 0.999), eps: float = 1e-6,
                 weight_decay: float = 0, adam: bool = False, use_global_grad_norm: bool = False) -> None:
        if lr < 0.0:
            raise ValueError(f"Invalid learning rate: {lr}")
        if not 0.0 <= betas[0] < 1.0:
            raise ValueError(f"Invalid beta parameter at index 0: {betas[0]}")
        if not 0.0 <= betas[1] < 1.0:
            raise ValueError(f"Invalid beta parameter at index 1: {betas[1]}")
        if eps < 0.0:
            raise ValueError(f"Invalid epsilon value: {eps}")
        self.adam = adam
        self.use_global_grad_norm = use_global_grad_norm
        self.global_grad_norm = torch.ones(1)
        super().__init__(params, dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay))

    def _before_step(self) -> None:
        if not self.use_global_grad_norm:
            return
        total = torch.zeros((), dtype=torch.float32)
        for group in self.param_groups:
            for p in self._params_with_grad(group):
                total = total + p.grad.pow(2).sum().float()
        self.global_grad_norm = total.sqrt()

    def _group_step(self, group: dict) -> None:
        beta1, beta2 = group["betas"]
        lr, eps, wd = group["lr"], group["eps"], group["weight_decay"]
        divide = self.use_global_grad_norm and float(self.global_grad_norm) > 1
        for p in self._params_with_grad(group):
            grad = p.grad
            if divide:
                grad = grad / self.global_grad_norm.to(grad.dtype)
            state = self.state[p]
            if len(state) == 0:
                state["step"] = 0
                state["exp_avg"] = torch.zeros_like(p)
                state["exp_avg_sq"] = torch.zeros_like(p)
            state["step"] += 1
            exp_avg, exp_avg_sq = state["exp_avg"], state["exp_avg_sq"]
            exp_avg.mul_(beta1).add_(grad, alpha=1 - beta1)
            exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
            adam_step = exp_avg / exp_avg_sq.sqrt().add(eps)
            if wd != 0:
                adam_step.add_(p, alpha=wd)
            trust = torch.ones((), dtype=p.dtype)
            if not self.adam:
                weight_norm = p.pow(2).sum().sqrt().clamp(0, 10)
                adam_norm = adam_step.pow(2).sum().sqrt()
                if weight_norm != 0 and adam_norm != 0:
                    trust = weight_norm / adam_norm
            p.addcmul_(adam_step, trust, value=-lr)


__all__ = ["NpuFusedOptimizerBase", "NpuFusedAdamW", "NpuFusedAdam", "NpuFusedSGD", "NpuFusedLamb"]
