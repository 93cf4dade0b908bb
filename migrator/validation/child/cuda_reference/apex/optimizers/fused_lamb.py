"""Reference for ``apex.optimizers.FusedLAMB`` (kernel: apex ``csrc/multi_tensor_lamb.cu``).

Apex defaults: lr=1e-3, betas=(0.9, 0.999), eps=1e-6, weight_decay=0.01, adam_w_mode=True,
bias_correction=True, grad_averaging=True, max_grad_norm=1.0, use_nvlamb=False. Per step:

1. ``gnorm`` = L2 norm over ALL grads of ALL groups; ``clip = gnorm / max_grad_norm`` if
   ``gnorm > max_grad_norm`` else 1 (global clipping inside the optimizer).
2. per element, ``g = grad / clip``; ``beta3 = 1 - beta1`` if grad_averaging else 1::

       L2 mode (adam_w_mode=False): g += wd * p
       m = beta1 * m + beta3 * g;  v = beta2 * v + (1 - beta2) * g * g
       u = (m / bc1) / (sqrt(v / bc2) + eps)
       decoupled mode (default):    u += wd * p

3. per tensor, ``ratio = lr * ||p|| / ||u||`` when (use_nvlamb or wd != 0) and both norms are
   non-zero, else ``lr``; ``p -= ratio * u``.

Deviations: apex overwrites ``p.grad`` with ``u`` as a side effect; the reference leaves grads
alone. ``max_grad_norm <= 0`` disables clipping here (apex would divide by zero).
"""

from __future__ import annotations

import torch


class FusedLAMB(torch.optim.Optimizer):
    def __init__(
        self,
        params,
        lr=1e-3,
        bias_correction=True,
        betas=(0.9, 0.999),
        eps=1e-6,
        weight_decay=0.01,
        amsgrad=False,
        adam_w_mode=True,
        grad_averaging=True,
        set_grad_none=True,
        max_grad_norm=1.0,
        use_nvlamb=False,
    ):
        if amsgrad:
            raise RuntimeError("FusedLAMB does not support the AMSGrad variant.")
        defaults = dict(
            lr=lr, bias_correction=bias_correction, betas=betas, eps=eps, weight_decay=weight_decay,
            grad_averaging=grad_averaging, max_grad_norm=max_grad_norm,
        )
        super().__init__(params, defaults)
        self.adam_w_mode = 1 if adam_w_mode else 0
        self.set_grad_none = set_grad_none
        self.use_nvlamb = use_nvlamb

    def zero_grad(self, set_to_none=None):
        super().zero_grad(set_to_none=self.set_grad_none if set_to_none is None else set_to_none)

    @torch.no_grad()
    def step(self, closure=None):
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        grads = [p.grad.float() for g in self.param_groups for p in g["params"] if p.grad is not None]
        if not grads:
            return loss
        gnorm = torch.linalg.vector_norm(torch.stack([torch.linalg.vector_norm(g) for g in grads]))
        max_norm = self.defaults["max_grad_norm"]
        clip = gnorm / max_norm if max_norm > 0 and gnorm > max_norm else torch.ones_like(gnorm)
        for group in self.param_groups:
            group["step"] = group.get("step", 0) + 1
            beta1, beta2 = group["betas"]
            bc1 = 1 - beta1 ** group["step"] if group["bias_correction"] else 1.0
            bc2 = 1 - beta2 ** group["step"] if group["bias_correction"] else 1.0
            beta3 = 1 - beta1 if group["grad_averaging"] else 1.0
            lr, eps, wd = group["lr"], group["eps"], group["weight_decay"]
            for p in group["params"]:
                if p.grad is None:
                    continue
                state = self.state[p]
                if len(state) == 0:
                    state["exp_avg"] = torch.zeros_like(p)
                    state["exp_avg_sq"] = torch.zeros_like(p)
                w = p.float()
                g = p.grad.float() / clip
                if not self.adam_w_mode:
                    g = g + wd * w
                m = state["exp_avg"].float().mul_(beta1).add_(g, alpha=beta3)
                v = state["exp_avg_sq"].float().mul_(beta2).addcmul_(g, g, value=1 - beta2)
                u = (m / bc1) / ((v / bc2).sqrt() + eps)
                if self.adam_w_mode:
                    u = u + wd * w
                ratio = torch.as_tensor(lr, dtype=torch.float32, device=w.device)
                if self.use_nvlamb or wd != 0:
                    pn, un = torch.linalg.vector_norm(w), torch.linalg.vector_norm(u)
                    ratio = torch.where((pn != 0) & (un != 0), lr * pn / un, ratio)
                p.copy_(w - ratio * u)
                state["exp_avg"].copy_(m)
                state["exp_avg_sq"].copy_(v)
        return loss
