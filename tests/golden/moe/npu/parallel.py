"""
Megatron-style tensor / expert parallel building blocks.

World = dp x tp. Tensor-parallel (TP) groups are blocks of consecutive ranks; ranks with the same
TP rank form the data-parallel group, and experts are spread over that group (EP = DP, as in
DeepSpeed-MoE). Every collective is skipped when its group has one rank, so the same model code
runs in a single process without torch.distributed.
"""

import os
from contextlib import contextmanager

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
import torch_npu

_NVTX = os.environ.get("MOE_NVTX", "1") == "1"


@contextmanager
def nvtx_range(name):
    """NVTX range for Nsight Systems; free when profiling is off or there is no GPU."""
    if _NVTX and torch.npu.is_available():
        torch_npu.npu.mstx.range_push(name)
        try:
            yield
        finally:
            torch_npu.npu.mstx.range_pop()
    else:
        yield


def group_size(group):
    return dist.get_world_size(group) if group is not None and dist.is_initialized() else 1


def group_rank(group):
    return dist.get_rank(group) if group is not None and dist.is_initialized() else 0


def init_parallel_groups(tp_size):
    """Returns (tp_group, dp_group) of this rank; every rank must call this (new_group is collective)."""
    world, rank = dist.get_world_size(), dist.get_rank()
    assert world % tp_size == 0, f"world size {world} not divisible by tp {tp_size}"
    tp_group = dp_group = None
    for i in range(world // tp_size):
        ranks = list(range(i * tp_size, (i + 1) * tp_size))
        g = dist.new_group(ranks)
        if rank in ranks:
            tp_group = g
    for j in range(tp_size):
        ranks = list(range(j, world, tp_size))
        g = dist.new_group(ranks)
        if rank in ranks:
            dp_group = g
    return tp_group, dp_group


class _CopyToTP(torch.autograd.Function):
    """Identity forward; all-reduce of the input grad backward (the input is replicated in TP)."""

    @staticmethod
    def forward(ctx, x, group):
        ctx.group = group
        return x.view_as(x)

    @staticmethod
    def backward(ctx, grad):
        grad = grad.contiguous()
        dist.all_reduce(grad, group=ctx.group)
        return grad, None


class _ReduceFromTP(torch.autograd.Function):
    """All-reduce forward (sum partial products); identity backward."""

    @staticmethod
    def forward(ctx, x, group):
        x = x.contiguous()
        dist.all_reduce(x, group=group)
        return x

    @staticmethod
    def backward(ctx, grad):
        return grad, None


class _AllToAll(torch.autograd.Function):
    """Variable-size all_to_all_single; the backward sends grads back along the same routes."""

    @staticmethod
    def forward(ctx, x, out_splits, in_splits, group):
        ctx.group, ctx.out_splits, ctx.in_splits = group, out_splits, in_splits
        out = x.new_empty((sum(out_splits),) + tuple(x.shape[1:]))
        dist.all_to_all_single(out, x.contiguous(), out_splits, in_splits, group=group)
        return out

    @staticmethod
    def backward(ctx, grad):
        out = grad.new_empty((sum(ctx.in_splits),) + tuple(grad.shape[1:]))
        dist.all_to_all_single(out, grad.contiguous(), ctx.in_splits, ctx.out_splits, group=ctx.group)
        return out, None, None, None


def copy_to_tp(x, group):
    return x if group_size(group) == 1 else _CopyToTP.apply(x, group)


def reduce_from_tp(x, group):
    return x if group_size(group) == 1 else _ReduceFromTP.apply(x, group)


def all_to_all(x, out_splits, in_splits, group):
    return x if group_size(group) == 1 else _AllToAll.apply(x, out_splits, in_splits, group)


class ColumnParallelLinear(nn.Linear):
    """Y = X W^T with W's output rows split over TP. ``parts`` > 1 marks a fused weight (e.g. QKV):
    each part is split on its own, otherwise rank 0 would get all of Q and none of V."""

    def __init__(self, in_features, out_features, bias=False, parts=1):
        super().__init__(in_features, out_features, bias=bias)
        self.parts, self.tp_group = parts, None

    def shard_(self, tp_group):
        tp, r = group_size(tp_group), group_rank(tp_group)
        self.tp_group = tp_group
        with torch.no_grad():
            chunks = [c.chunk(tp, dim=0)[r] for c in self.weight.chunk(self.parts, dim=0)]
            self.weight = nn.Parameter(torch.cat(chunks).clone())
            self.weight.tp_shard = (0, self.parts)  # (split dim, fused parts): how to un-shard
            if self.bias is not None:
                chunks = [c.chunk(tp)[r] for c in self.bias.chunk(self.parts)]
                self.bias = nn.Parameter(torch.cat(chunks).clone())
                self.bias.tp_shard = (0, self.parts)
        self.out_features = self.weight.shape[0]
        return self

    def forward(self, x):
        return F.linear(copy_to_tp(x, self.tp_group), self.weight, self.bias)


class RowParallelLinear(nn.Linear):
    """Y = sum over TP of X_r W_r^T: input features split, partial outputs all-reduced."""

    def __init__(self, in_features, out_features, bias=False):
        super().__init__(in_features, out_features, bias=bias)
        self.tp_group = None

    def shard_(self, tp_group):
        tp, r = group_size(tp_group), group_rank(tp_group)
        self.tp_group = tp_group
        with torch.no_grad():
            self.weight = nn.Parameter(self.weight.chunk(tp, dim=1)[r].clone())
            self.weight.tp_shard = (1, 1)
        self.in_features = self.weight.shape[1]
        return self

    def forward(self, x):
        y = reduce_from_tp(F.linear(x, self.weight), self.tp_group)
        return y if self.bias is None else y + self.bias  # bias added once, after the reduction
