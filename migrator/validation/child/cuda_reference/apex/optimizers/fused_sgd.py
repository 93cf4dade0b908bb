"""Reference for ``apex.optimizers.FusedSGD`` (kernel: apex ``csrc/multi_tensor_sgd_kernel.cu``).

Per element, in float32::

    if wd and not wd_after_momentum: g += wd * p
    if momentum: buf = g on the first step, else momentum * buf + (1 - dampening) * g
                 g = g + momentum * buf if nesterov else buf
    if wd and wd_after_momentum:     g += wd * p
    p -= lr * g

With the default ``wd_after_momentum=False`` this is exactly ``torch.optim.SGD``.
"""

from __future__ import annotations

import torch
from torch.optim.optimizer import required


class FusedSGD(torch.optim.Optimizer):
    def __init__(
        self,
        params,
        lr=required,
        momentum=0,
        dampening=0,
        weight_decay=0,
        nesterov=False,
        wd_after_momentum=False,
        materialize_master_grads=True,
        set_grad_none=False,
    ):
        if lr is not required and lr < 0.0:
            raise ValueError(f"Invalid learning rate: {lr}")
        if momentum < 0.0:
            raise ValueError(f"Invalid momentum value: {momentum}")
        if weight_decay < 0.0:
            raise ValueError(f"Invalid weight_decay value: {weight_decay}")
        if nesterov and (momentum <= 0 or dampening != 0):
            raise ValueError("Nesterov momentum requires a momentum and zero dampening")
        defaults = dict(lr=lr, momentum=momentum, dampening=dampening, weight_decay=weight_decay, nesterov=nesterov)
        super().__init__(params, defaults)
        self.wd_after_momentum = wd_after_momentum
        self.materialize_master_grads = materialize_master_grads
        self.set_grad_none = set_grad_none

    def zero_grad(self, set_to_none=None):
        super().zero_grad(set_to_none=self.set_grad_none if set_to_none is None else set_to_none)

    @torch.no_grad()
    def step(self, closure=None):
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        for group in self.param_groups:
            lr, mom, damp, wd = group["lr"], group["momentum"], group["dampening"], group["weight_decay"]
            for p in group["params"]:
                if p.grad is None:
                    continue
                g, w = p.grad.float(), p.float()
                if wd != 0 and not self.wd_after_momentum:
                    g = g + wd * w
                if mom != 0:
                    state = self.state[p]
                    if "momentum_buffer" not in state:  # apex "first_run": buffer = grad
                        buf = g.clone()
                    else:
                        buf = state["momentum_buffer"].float() * mom + (1 - damp) * g
                    state["momentum_buffer"] = buf.to(p.dtype)
                    g = g + mom * buf if group["nesterov"] else buf
                if wd != 0 and self.wd_after_momentum:
                    g = g + wd * w
                p.copy_(w - lr * g)
        return loss
