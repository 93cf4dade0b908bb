"""Hooks for `migrate validate`: the tiny MoE model, deterministic batches, the training loss.

Batches are dicts; the model gets ``model(**{k: batch[k] for k in INPUT_KEYS if k in batch})``
and the loss is ``loss_fn(out, batch)`` (cross entropy + the load-balancing term, as train.py).

``parallelize(model, mesh, stage)`` shards a full model in place over a 1-D mesh (or process
group):
* "tp": fused QKV (per part) and the output projection of every attention layer; every rank
  must get the SAME batch. Sharded params carry ``p.tp_shard = (dim, parts)`` for un-sharding.
* "ep": each rank keeps ``n_experts / N`` experts (``p.expert_parallel = True``); every rank gets
  ITS OWN batch, and grads need train.sync_grads: dense grads averaged over the group, expert
  grads divided by N (they already hold every rank's tokens).
"""

import os
import sys
from dataclasses import replace

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from data_utils import synthetic_batch  # noqa: E402
from modeling import MOE_CONFIGS, MoEGPT  # noqa: E402

INPUT_KEYS = ("idx",)
AUX_LOSS_COEF = 0.01  # train.py default
BATCH_SIZE, SEQ_LEN = 4, 16


def make_model(dropout: float = 0.0) -> torch.nn.Module:
    return MoEGPT(replace(MOE_CONFIGS["tiny"], dropout=dropout))


def make_batch(step: int, rank: int = 0, world_size: int = 1) -> dict:
    idx, targets = synthetic_batch(step, rank, world_size, BATCH_SIZE, SEQ_LEN, MOE_CONFIGS["tiny"].vocab_size)
    return {"idx": idx, "targets": targets}


def loss_fn(out, batch) -> torch.Tensor:
    logits, aux = out
    ce = F.cross_entropy(logits.float().flatten(0, 1), batch["targets"].flatten())
    return ce + AUX_LOSS_COEF * aux


def sync_grads(model, mesh, stage):
    """What train.py does between backward() and optimizer.step(): train.sync_grads for EP."""
    if stage == "ep":
        from train import sync_grads as _sync_grads

        _sync_grads(model, mesh.get_group() if hasattr(mesh, "get_group") else mesh)


def parallelize(model, mesh, stage):
    group = mesh.get_group() if hasattr(mesh, "get_group") else mesh
    if stage == "tp":
        return model.parallelize_(tp_group=group)
    if stage == "ep":
        return model.parallelize_(ep_group=group)
    raise ValueError(f"moe sample supports stages 'tp' and 'ep', not {stage!r}")
