"""Hooks for `migrate validate`: the tiny GQA/RoPE/RMSNorm model, right-padded batches, a loss that
ignores padding, SGD with parameter groups (no weight decay on norms), and a training step with
gradient accumulation over two calls, loss scaling and clipping."""

import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from model import VOCAB, TinyLlama  # noqa: E402

INPUT_KEYS = ("idx", "pad_mask")
BATCH, SEQ = 2, 12
ACCUM, GRAD_CLIP = 2, 50.0  # clipping only catches blow-ups here


def make_model(dropout: float = 0.0) -> torch.nn.Module:
    return TinyLlama()


def make_batch(step: int) -> dict:
    g = torch.Generator().manual_seed(1000 + step)
    idx = torch.randint(0, VOCAB, (BATCH, SEQ + 1), generator=g)
    lengths = torch.tensor([SEQ, SEQ - 3 - step % 2])
    pad_mask = torch.arange(SEQ)[None, :] < lengths[:, None]
    targets = idx[:, 1:].masked_fill(~pad_mask, -100)
    return {"idx": idx[:, :-1].masked_fill(~pad_mask, 0), "pad_mask": pad_mask, "targets": targets}


def loss_fn(out, batch) -> torch.Tensor:
    return F.cross_entropy(out.float().flatten(0, 1), batch["targets"].flatten(), ignore_index=-100)


def make_optimizer(model):
    decay = [p for n, p in model.named_parameters() if p.dim() >= 2]
    no_decay = [p for n, p in model.named_parameters() if p.dim() < 2]
    return torch.optim.SGD([{"params": decay, "weight_decay": 0.1}, {"params": no_decay, "weight_decay": 0.0}],
                           lr=0.1, momentum=0.9)


def make_scaler():
    return torch.cuda.amp.GradScaler(init_scale=2.0**10)


def train_step(model, optimizer, loss, scaler):
    """Accumulate two micro-batches per optimizer step: scaled backward, unscale, clip, step."""
    optimizer.micro_steps = getattr(optimizer, "micro_steps", 0) + 1
    scaler.scale(loss / ACCUM).backward()
    if optimizer.micro_steps % ACCUM:
        return
    scaler.unscale_(optimizer)
    torch.nn.utils.clip_grad_norm_(model.parameters(), GRAD_CLIP)
    scaler.step(optimizer)
    scaler.update()
    optimizer.zero_grad(set_to_none=True)
