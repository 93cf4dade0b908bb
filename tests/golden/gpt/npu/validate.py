"""Hooks for `migrate validate`: the tiny GPT, deterministic batches and the training loss.

Batches are dicts; the model gets ``model(**{k: batch[k] for k in INPUT_KEYS if k in batch})``
(GPT.forward also accepts ``targets``, so ``model(**batch)`` works too) and the loss is
``loss_fn(out, batch)``. Even steps use
dense causal attention over K/V that are longer than Q (memory slots: bottom-right causal
alignment matters); odd steps add ``cu_seqlens`` and take the packed varlen path.
"""

import os
import sys
from dataclasses import replace

import torch
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from data import get_batch  # noqa: E402
from model import GPT, GPT_CONFIGS  # noqa: E402

INPUT_KEYS = ("idx", "positions", "cu_seqlens")
BATCH_SIZE, SEQ_LEN = 2, 32


def make_model(dropout: float = 0.0) -> torch.nn.Module:
    return GPT(replace(GPT_CONFIGS["tiny"], dropout=dropout))


def make_batch(step: int) -> dict:
    b = get_batch(step, BATCH_SIZE, SEQ_LEN, GPT_CONFIGS["tiny"].vocab_size)
    batch = {"idx": b["idx"], "targets": b["targets"]}
    if step % 2 == 1:
        batch.update(positions=b["positions"], cu_seqlens=b["cu_seqlens"])
    return batch


def loss_fn(out, batch) -> torch.Tensor:
    logits = out[0] if isinstance(out, tuple) else out
    return F.cross_entropy(logits.float().flatten(0, 1), batch["targets"].flatten())


def make_optimizer(model):
    """train.py's optimizer with the library defaults it relies on, for the isolated optimizer check."""

    return torch.optim.AdamW(model.parameters(), lr=3e-4, betas=(0.9, 0.95), eps=1e-8, weight_decay=0.0)


GRAD_CLIP = 1.0


def make_scaler():
    """train.py's loss scaler, enabled here (train.py enables it for fp16) so loss scaling is validated."""
    return torch.npu.amp.GradScaler(init_scale=2.0**16)


def train_step(model, optimizer, loss, scaler):
    """train.py's step after the forward: scaled backward, unscale, clip, step, update."""
    scaler.scale(loss).backward()
    scaler.unscale_(optimizer)
    torch.nn.utils.clip_grad_norm_(model.parameters(), GRAD_CLIP)
    scaler.step(optimizer)
    scaler.update()
    optimizer.zero_grad(set_to_none=True)


def parallelize(model, mesh, stage):
    """train.py uses plain DDP, so the only stage is data parallel ("dp")."""
    if stage != "dp":
        raise ValueError(f"gpt sample only supports stage 'dp', not {stage!r}")
    return DDP(model, process_group=mesh.get_group() if mesh is not None else None)
