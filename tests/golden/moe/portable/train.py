"""
Train a small MoE language model with tensor parallel attention and expert parallel FFNs.

    python train.py --tiny                                    # one GPU, no torch.distributed
    torchrun --nproc_per_node=8 train.py --tp 2               # dp=4 (= EP 4) x tp=2
"""

import argparse
import itertools
import os

import torch
import torch.distributed as dist
import torch.nn.functional as F

from _migrate_runtime import _migrate_backend, _migrate_device, _migrate_device_module
from data_utils import synthetic_batch
from modeling import MOE_CONFIGS, MoEGPT
from parallel import group_rank, group_size, init_parallel_groups, nvtx_range


def get_args():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--tiny", action="store_true", help="tiny model, 6 steps: a smoke test")
    p.add_argument("--model", choices=sorted(MOE_CONFIGS), default="small")
    p.add_argument("--tp", type=int, default=1, help="tensor parallel size")
    p.add_argument("--steps", type=int, default=10000)
    p.add_argument("--batch-size", type=int, default=8, help="per data-parallel rank")
    p.add_argument("--seq-len", type=int, default=2048)
    p.add_argument("--lr", type=float, default=3e-4)
    p.add_argument("--aux-loss-coef", type=float, default=0.01)
    p.add_argument("--seed", type=int, default=42)
    args = p.parse_args()
    if args.tiny:
        args.model, args.steps, args.batch_size, args.seq_len, args.lr = "tiny", 6, 4, 16, 3e-3
    return args


class CUDAPrefetcher:
    """Copies the next batch to the GPU on a side stream while the current step computes."""

    def __init__(self, make_batch, device):
        self.make_batch, self.device = make_batch, device
        self.stream = _migrate_device_module().Stream(device=device)
        self.step = 0
        self._preload()

    def _preload(self):
        cpu = self.make_batch(self.step)
        with _migrate_device_module().stream(self.stream):
            self.next = [t.pin_memory().to(_migrate_device(self.device), non_blocking=True) for t in cpu]

    def __next__(self):
        _migrate_device_module().current_stream().wait_stream(self.stream)
        batch = self.next
        for t in batch:
            t.record_stream(_migrate_device_module().current_stream())  # don't let the allocator reuse it early
        self.step += 1
        self._preload()
        return batch


def sync_grads(model, dp_group):
    """Average dense grads over data parallel. Expert grads already hold every dp rank's tokens
    (the all-to-all brought them here), so they only need the same 1/dp factor."""
    dp = group_size(dp_group)
    if dp == 1:
        return
    dense = [p.grad for p in model.parameters() if p.grad is not None and not getattr(p, "expert_parallel", False)]
    flat = torch.cat([g.reshape(-1) for g in dense])
    dist.all_reduce(flat, group=dp_group)
    flat.div_(dp)
    offset = 0
    for g in dense:
        g.copy_(flat[offset:offset + g.numel()].view_as(g))
        offset += g.numel()
    for p in model.parameters():
        if p.grad is not None and getattr(p, "expert_parallel", False):
            p.grad.div_(dp)


def main():
    args = get_args()
    distributed = int(os.environ.get("WORLD_SIZE", "1")) > 1
    tp_group = dp_group = None
    if distributed:
        dist.init_process_group(backend=_migrate_backend())
        local_rank = int(os.environ["LOCAL_RANK"])
        _migrate_device_module().set_device(local_rank)
        tp_group, dp_group = init_parallel_groups(args.tp)
        device = torch.device(str(_migrate_device(local_rank)))
    else:
        device = torch.device(str(_migrate_device(0)))
    rank = dist.get_rank() if distributed else 0
    dp_rank, dp_size = group_rank(dp_group), group_size(dp_group)

    torch.manual_seed(args.seed)  # same full weights everywhere, then each rank keeps its shard
    cfg = MOE_CONFIGS[args.model]
    model = MoEGPT(cfg).parallelize_(tp_group, dp_group).to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.0)

    def make_batch(step):
        return synthetic_batch(step, dp_rank, dp_size, args.batch_size, args.seq_len, cfg.vocab_size, args.seed)

    if _migrate_device_module().is_available():
        batches = CUDAPrefetcher(make_batch, device)
    else:  # no side stream to overlap with: plain synchronous copies
        batches = ([t.to(device) for t in make_batch(step)] for step in itertools.count())
    start, end = _migrate_device_module().Event(enable_timing=True), _migrate_device_module().Event(enable_timing=True)
    for step in range(args.steps):
        idx, targets = next(batches)
        start.record()
        with nvtx_range(f"step {step}"):
            with torch.autocast(_migrate_device().type, dtype=torch.bfloat16):
                logits, aux = model(idx)
            ce = F.cross_entropy(logits.float().flatten(0, 1), targets.flatten())
            loss = ce + args.aux_loss_coef * aux
            loss.backward()
            sync_grads(model, dp_group)
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
        end.record()
        _migrate_device_module().synchronize()
        if rank == 0:
            print(f"step {step:4d} | loss {loss.item():.4f} | ce {ce.item():.4f} | aux {aux.item():.4f} | "
                  f"{start.elapsed_time(end):.1f} ms")
    if distributed:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
