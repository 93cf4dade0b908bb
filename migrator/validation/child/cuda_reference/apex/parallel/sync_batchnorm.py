"""Reference for ``apex.parallel.SyncBatchNorm`` and ``convert_syncbn_model``.

Batch statistics are the mean and biased variance over the batch of ALL ranks of the process
group (running_var is updated with the unbiased estimate, as in BatchNorm). On CUDA/NPU inputs we
defer to ``torch.nn.SyncBatchNorm``; on CPU (which torch's version rejects once a process group
exists) per-channel sum, sum of squares and count are combined with an autograd-aware
``all_reduce``, so the gloo backend works. ``fuse_relu``/``z`` follow apex's optimized module:
``relu(bn(x) + z)``. ``channel_last`` is accepted for the CUDA path only.
"""

from __future__ import annotations

import torch
import torch.distributed as dist
import torch.nn.functional as F

__all__ = ["SyncBatchNorm", "convert_syncbn_model"]


class _AllReduceSum(torch.autograd.Function):
    """Sum over ranks; the backward sums the grads too (every rank's loss used the total)."""

    @staticmethod
    def forward(ctx, x, group):
        ctx.group = group
        x = x.clone()
        dist.all_reduce(x, group=group)
        return x

    @staticmethod
    def backward(ctx, grad):
        grad = grad.clone()
        dist.all_reduce(grad, group=ctx.group)
        return grad, None


class SyncBatchNorm(torch.nn.SyncBatchNorm):
    def __init__(self, num_features, eps=1e-5, momentum=0.1, affine=True, track_running_stats=True,
                 process_group=None, channel_last=False, fuse_relu=False):
        super().__init__(num_features, eps, momentum, affine, track_running_stats, process_group)
        self.channel_last = channel_last
        self.fuse_relu = fuse_relu

    def _group_size(self) -> int:
        if not (dist.is_available() and dist.is_initialized()):
            return 1
        return dist.get_world_size(self.process_group or dist.group.WORLD)

    def forward(self, input, z=None):
        if input.device.type != "cpu" or not self.training or self._group_size() == 1:
            out = super().forward(input)
        else:
            out = self._cpu_sync_forward(input)
        if z is not None:
            out = out + z
        return F.relu(out) if self.fuse_relu else out

    def _cpu_sync_forward(self, x):
        if self.channel_last:
            raise NotImplementedError("channel_last SyncBatchNorm is not emulated on CPU")
        dims = [0] + list(range(2, x.dim()))
        xf = x.float()
        count = torch.full((x.shape[1],), xf.numel() / x.shape[1], dtype=torch.float32, device=x.device)
        stats = torch.stack([xf.sum(dims), xf.pow(2).sum(dims), count])
        stats = _AllReduceSum.apply(stats, self.process_group or dist.group.WORLD)
        n = stats[2]
        mean = stats[0] / n
        var = stats[1] / n - mean * mean
        if self.track_running_stats:
            if self.num_batches_tracked is None:
                raise AssertionError("num_batches_tracked must not be None")  # as torch.nn.SyncBatchNorm
            with torch.no_grad():
                self.num_batches_tracked.add_(1)
                mom = self.momentum if self.momentum is not None else 1.0 / float(self.num_batches_tracked)
                # a buffer set to None is not tracked: torch hands None to batch_norm and updates nothing
                if self.running_mean is not None:
                    self.running_mean.mul_(1 - mom).add_(mean.detach(), alpha=mom)
                if self.running_var is not None:
                    self.running_var.mul_(1 - mom).add_((var * n / (n - 1)).detach(), alpha=mom)
        shape = [1, -1] + [1] * (x.dim() - 2)
        y = (xf - mean.view(shape)) * torch.rsqrt(var.view(shape) + self.eps)
        if self.affine:
            y = y * self.weight.float().view(shape) + self.bias.float().view(shape)
        return y.to(x.dtype)


def convert_syncbn_model(module, process_group=None, channel_last=False):
    """Recursively replace every ``_BatchNorm`` with ``SyncBatchNorm``, keeping params and stats."""
    mod = module
    if isinstance(module, torch.nn.modules.batchnorm._BatchNorm) and not isinstance(module, SyncBatchNorm):
        mod = SyncBatchNorm(module.num_features, module.eps, module.momentum, module.affine,
                            module.track_running_stats, process_group, channel_last=channel_last)
        mod.running_mean = module.running_mean
        mod.running_var = module.running_var
        mod.num_batches_tracked = module.num_batches_tracked
        if module.affine:
            mod.weight.data = module.weight.data.clone().detach()
            mod.bias.data = module.bias.data.clone().detach()
        mod.train(module.training)
    for name, child in module.named_children():
        mod.add_module(name, convert_syncbn_model(child, process_group=process_group, channel_last=channel_last))
    return mod
