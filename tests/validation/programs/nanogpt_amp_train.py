"""nanoGPT-style training script (tiny): torchrun DDP, gradient accumulation, amp with a GradScaler."""
import argparse
import os
from contextlib import nullcontext

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP


class TinyLM(nn.Module):
    def __init__(self, vocab=64, dim=32):
        super().__init__()
        self.emb = nn.Embedding(vocab, dim)
        self.norm = nn.LayerNorm(dim)
        self.fc = nn.Linear(dim, 4 * dim)
        self.proj = nn.Linear(4 * dim, dim)
        self.head = nn.Linear(dim, vocab)
        self.drop = nn.Dropout(0.1)

    def forward(self, idx, targets):
        x = self.emb(idx)
        x = x + self.drop(self.proj(F.gelu(self.fc(self.norm(x)))))
        logits = self.head(x)
        return F.cross_entropy(logits.float().view(-1, logits.size(-1)), targets.reshape(-1))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--dtype", default="bfloat16", choices=["float32", "bfloat16", "float16"])
    p.add_argument("--steps", type=int, default=50)
    args = p.parse_args()
    ddp = int(os.environ.get("RANK", -1)) != -1
    if ddp:
        dist.init_process_group(backend="nccl")
        rank, world = dist.get_rank(), dist.get_world_size()
        device = torch.device("cuda", int(os.environ["LOCAL_RANK"]))
        torch.cuda.set_device(device)
    else:
        rank, world = 0, 1
        device = torch.device("cuda")
    gradient_accumulation_steps = 3
    assert gradient_accumulation_steps % world == 0
    gradient_accumulation_steps //= world
    torch.manual_seed(1337)
    ptdtype = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}[args.dtype]
    ctx = nullcontext() if args.dtype == "float32" else torch.autocast("cuda", dtype=ptdtype)
    scaler = torch.cuda.amp.GradScaler(enabled=args.dtype == "float16", init_scale=1024.0, growth_interval=2)
    model = TinyLM().to(device)
    if ddp:
        model = DDP(model, device_ids=[int(os.environ["LOCAL_RANK"])])
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    g = torch.Generator().manual_seed(rank)
    for _step in range(args.steps):
        for _micro in range(gradient_accumulation_steps):
            x = torch.randint(0, 64, (4, 17), generator=g).to(device)
            with ctx:
                loss = model(x[:, :-1], x[:, 1:]) / gradient_accumulation_steps
            scaler.scale(loss).backward()
        scaler.unscale_(optimizer)
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        scaler.step(optimizer)
        scaler.update()
        optimizer.zero_grad(set_to_none=True)
    if ddp:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
