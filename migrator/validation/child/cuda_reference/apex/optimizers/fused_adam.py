"""Reference for ``apex.optimizers.FusedAdam`` (kernel: apex ``csrc/multi_tensor_adam.cu``).

Per element, in float32 (``MATH_T``), with ``bc1 = 1 - beta1**step``, ``bc2 = 1 - beta2**step``
(both 1 when ``bias_correction=False``)::

    adam_w_mode=False (L2):      g += wd * p
    m = beta1 * m + (1 - beta1) * g
    v = beta2 * v + (1 - beta2) * g * g
    update = (m / bc1) / (sqrt(v / bc2) + eps)
    adam_w_mode=True (default):  update += wd * p        # decoupled, uses p before the step
    p -= lr * update

Apex's own defaults are kept: lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0,
adam_w_mode=True, bias_correction=True. (``torch.optim.AdamW`` defaults to weight_decay=1e-2.)
With bias correction this equals ``torch.optim.AdamW`` / ``Adam`` with the same hyper-parameters;
it is written out because torch has no switch for ``bias_correction=False``.
"""

from __future__ import annotations

import torch


class FusedAdam(torch.optim.Optimizer):
    def __init__(
        self,
        params,
        lr=1e-3,
        bias_correction=True,
        betas=(0.9, 0.999),
        eps=1e-8,
        adam_w_mode=True,
        weight_decay=0.0,
        amsgrad=False,
        set_grad_none=True,
        capturable=False,
        master_weights=False,
    ):
        if amsgrad:
            raise RuntimeError("FusedAdam does not support the AMSGrad variant.")
        if master_weights and not capturable:
            raise RuntimeError("Master weights is currently only supported with the capturable version.")
        defaults = dict(lr=lr, bias_correction=bias_correction, betas=betas, eps=eps, weight_decay=weight_decay)
        super().__init__(params, defaults)
        self.adam_w_mode = 1 if adam_w_mode else 0
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
            # apex keeps one step counter per group, bumped even if no param has a grad
            group["step"] = group.get("step", 0) + 1
            beta1, beta2 = group["betas"]
            bc1 = 1 - beta1 ** group["step"] if group["bias_correction"] else 1.0
            bc2 = 1 - beta2 ** group["step"] if group["bias_correction"] else 1.0
            lr, eps, wd = group["lr"], group["eps"], group["weight_decay"]
            for p in group["params"]:
                if p.grad is None:
                    continue
                if p.grad.is_sparse:
                    raise RuntimeError("FusedAdam does not support sparse gradients, please consider SparseAdam instead")
                state = self.state[p]
                if len(state) == 0:
                    state["exp_avg"] = torch.zeros_like(p)
                    state["exp_avg_sq"] = torch.zeros_like(p)
                g, w = p.grad.float(), p.float()
                m, v = state["exp_avg"].float(), state["exp_avg_sq"].float()
                if not self.adam_w_mode:
                    g = g + wd * w
                m.mul_(beta1).add_(g, alpha=1 - beta1)
                v.mul_(beta2).addcmul_(g, g, value=1 - beta2)
                update = (m / bc1) / ((v / bc2).sqrt() + eps)
                if self.adam_w_mode:
                    update = update + wd * w
                p.copy_(w - lr * update)
                state["exp_avg"].copy_(m)
                state["exp_avg_sq"].copy_(v)
        return loss
