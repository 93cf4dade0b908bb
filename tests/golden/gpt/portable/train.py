"""
Pretrain a small GPT.

Single GPU:
    python train.py --dtype bfloat16
One node, DDP (see launch.sh):
    torchrun --standalone --nproc_per_node=8 train.py --doc-masking
Smoke test (seconds):
    python train.py --tiny
"""

import argparse
import math
import os
import time
from contextlib import nullcontext
from dataclasses import replace

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

from _migrate_runtime import _migrate_backend, _migrate_device, _migrate_device_module
from data import get_batch
from model import GPT, GPT_CONFIGS


def get_args():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--tiny", action="store_true", help="tiny model, 8 steps: a smoke test")
    p.add_argument("--model", choices=sorted(GPT_CONFIGS), default="125m")
    p.add_argument("--steps", type=int, default=20000)
    p.add_argument("--batch-size", type=int, default=16, help="per GPU")
    p.add_argument("--seq-len", type=int, default=2048)
    p.add_argument("--lr", type=float, default=3e-4)
    p.add_argument("--min-lr", type=float, default=3e-5)
    p.add_argument("--warmup", type=int, default=500)
    p.add_argument("--weight-decay", type=float, default=0.1)
    p.add_argument("--grad-clip", type=float, default=1.0)
    p.add_argument("--dtype", choices=["float32", "bfloat16", "float16"], default="bfloat16")
    p.add_argument("--doc-masking", action="store_true", help="varlen attention inside packed documents")
    p.add_argument("--log-interval", type=int, default=10)
    p.add_argument("--seed", type=int, default=1337)
    args = p.parse_args()
    if args.tiny:
        args.steps, args.batch_size, args.seq_len = 8, 4, 32
        args.lr, args.min_lr, args.warmup, args.log_interval = 5e-3, 1e-3, 1, 1
    return args


def model_config(args):
    cfg = GPT_CONFIGS["tiny" if args.tiny else args.model]
    return replace(cfg, block_size=max(cfg.block_size, args.seq_len))


def get_lr(step, args):
    # linear warmup, then cosine decay to min_lr
    if step < args.warmup:
        return args.lr * (step + 1) / args.warmup
    ratio = (step - args.warmup) / max(1, args.steps - args.warmup)
    return args.min_lr + 0.5 * (1.0 + math.cos(math.pi * ratio)) * (args.lr - args.min_lr)


def main():
    args = get_args()
    ddp = int(os.environ.get("RANK", -1)) != -1
    if ddp:
        dist.init_process_group(backend=_migrate_backend())
        rank, world_size = dist.get_rank(), dist.get_world_size()
        local_rank = int(os.environ["LOCAL_RANK"])
        device = torch.device(_migrate_device().type, local_rank)
        _migrate_device_module().set_device(device)
    else:
        rank, world_size, local_rank = 0, 1, 0
        device = torch.device(_migrate_device().type)
    master = rank == 0

    torch.manual_seed(args.seed)  # identical init on every rank (DDP broadcasts rank 0 anyway)
    _migrate_device_module().manual_seed(args.seed)
    torch.backends.cuda.matmul.allow_tf32 = True
    torch.backends.cudnn.allow_tf32 = True
    torch.backends.cudnn.benchmark = True

    # fp16 needs loss scaling; bf16 has fp32's exponent range and does not.
    if args.dtype == "float16":
        autocast = torch.autocast(_migrate_device().type, dtype=torch.float16)
    elif args.dtype == "bfloat16":
        autocast = torch.autocast(_migrate_device().type, dtype=torch.bfloat16)
    else:
        autocast = nullcontext()
    scaler = torch.amp.GradScaler(_migrate_device().type, enabled=args.dtype == "float16")

    cfg = model_config(args)
    model = GPT(cfg).to(_migrate_device())
    if master:
        n_params = sum(p.numel() for p in model.parameters())
        print(f"GPT: {n_params / 1e6:.2f}M params, {_migrate_device_module().device_count()} visible GPU(s), world {world_size}")
    raw_model = model
    if ddp:
        model = DDP(model, device_ids=[local_rank])

    # No weight decay on norms and other 1-D params.
    decay = [p for p in raw_model.parameters() if p.dim() >= 2]
    no_decay = [p for p in raw_model.parameters() if p.dim() < 2]
    optimizer = torch.optim.AdamW(
        [{"params": decay, "weight_decay": args.weight_decay}, {"params": no_decay, "weight_decay": 0.0}],
        lr=args.lr, betas=(0.9, 0.95), eps=1e-8,
        weight_decay=0.0,
    )

    tokens_per_step = args.batch_size * args.seq_len * world_size
    for step in range(args.steps):
        lr = get_lr(step, args)
        for group in optimizer.param_groups:
            group["lr"] = lr
        # every rank reads its own shard of the global batch
        batch = get_batch(step * world_size + rank, args.batch_size, args.seq_len, cfg.vocab_size)
        idx = batch["idx"].to(_migrate_device(), non_blocking=True)
        targets = batch["targets"].to(_migrate_device(), non_blocking=True)

        _migrate_device_module().synchronize()
        t0 = time.time()
        with autocast:
            if args.doc_masking:
                _, loss = model(idx, targets, positions=batch["positions"].to(device),
                                cu_seqlens=batch["cu_seqlens"].to(device, non_blocking=True))
            else:
                _, loss = model(idx, targets)
        scaler.scale(loss).backward()
        if args.grad_clip > 0:
            scaler.unscale_(optimizer)
            torch.nn.utils.clip_grad_norm_(model.parameters(), args.grad_clip)
        scaler.step(optimizer)
        scaler.update()
        optimizer.zero_grad(set_to_none=True)
        _migrate_device_module().synchronize()
        dt = time.time() - t0

        if step % args.log_interval == 0 or step == args.steps - 1:
            loss_avg = loss.detach().float()
            if ddp:
                dist.all_reduce(loss_avg, op=dist.ReduceOp.AVG)
            if master:
                print(f"step {step:5d} | loss {loss_avg.item():.4f} | lr {lr:.2e} | "
                      f"{dt * 1000:.1f} ms | {tokens_per_step / dt:.0f} tok/s")

    if master:
        print(f"peak memory: {_migrate_device_module().max_memory_allocated() / 2**20:.1f} MiB")
    if ddp:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
