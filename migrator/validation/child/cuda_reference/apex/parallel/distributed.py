"""Reference for ``apex.parallel.DistributedDataParallel`` on top of torch DDP.

Apex DDP (removed upstream in 2025) all-reduces grads in buckets on the current device and never
takes ``device_ids``. Numerically it is torch DDP: grads are summed and divided by the world
size. ``gradient_average=False`` (sum only) and ``gradient_predivide_factor`` (divide before the
all-reduce, multiply back after) are honoured with a DDP comm hook; ``message_size`` (elements)
becomes the bucket size; ``delay_allreduce``, ``allreduce_always_fp32``, stream and communicator
options only change scheduling and are accepted and ignored.
"""

from __future__ import annotations

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as _TorchDDP

__all__ = ["DistributedDataParallel"]


def _scaled_allreduce_hook(state, bucket):
    world, predivide, average = state
    buf = bucket.buffer()
    if predivide != 1.0:
        buf.div_(predivide)
    fut = dist.all_reduce(buf, async_op=True).get_future()

    def _finish(f):
        out = f.value()[0]
        if average:
            out.mul_(predivide / world)
        elif predivide != 1.0:
            out.mul_(predivide)
        return out

    return fut.then(_finish)


class DistributedDataParallel(_TorchDDP):
    def __init__(
        self,
        module,
        message_size=10000000,
        delay_allreduce=False,
        shared_param=None,
        allreduce_trigger_params=None,
        retain_allreduce_buffers=False,
        allreduce_always_fp32=False,
        num_allreduce_streams=1,
        allreduce_communicators=None,
        gradient_average=True,
        gradient_predivide_factor=1.0,
        gradient_average_split_factor=None,
        prof=False,
    ):
        if shared_param is not None:
            raise ValueError("shared_param is no longer supported as an option.  It was misleadingly named from the start.")
        if gradient_average_split_factor is not None:
            gradient_predivide_factor = gradient_average_split_factor  # old spelling of the same knob
        bucket_mb = max(message_size * 4 / 2**20, 1.0)  # apex counts elements, DDP megabytes
        super().__init__(module, bucket_cap_mb=bucket_mb)
        self.gradient_average = gradient_average
        self.gradient_predivide_factor = float(gradient_predivide_factor)
        if not gradient_average or self.gradient_predivide_factor != 1.0:
            state = (dist.get_world_size(), self.gradient_predivide_factor, gradient_average)
            self.register_comm_hook(state, _scaled_allreduce_hook)

    def _passing_sync_batchnorm_handle(self, module):
        # torch DDP refuses SyncBatchNorm on CPU modules; our apex SyncBatchNorm reference has a
        # gloo-capable CPU path, so only torch's own SyncBatchNorm layers go through the check.
        from .sync_batchnorm import SyncBatchNorm

        if any(isinstance(m, torch.nn.SyncBatchNorm) and not isinstance(m, SyncBatchNorm) for m in module.modules()):
            super()._passing_sync_batchnorm_handle(module)
