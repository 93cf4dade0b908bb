"""Hooks for `migrate validate`: tiny ResNet, deterministic image batches, cross entropy.

Batches are dicts; the model gets ``model(**{k: batch[k] for k in INPUT_KEYS})`` and the loss
is ``loss_fn(out, batch)``. No ``parallelize``: the program's parallelism is plain data parallel.
"""

import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from resnet import resnet_cifar  # noqa: E402
from synthetic_data import SyntheticImages  # noqa: E402

INPUT_KEYS = ("x",)
BATCH_SIZE = 8
_DATA = SyntheticImages(size=1_000_000)


def make_model(dropout: float = 0.0) -> torch.nn.Module:
    return resnet_cifar("resnet-tiny")  # no dropout layers in this model


def make_batch(step: int) -> dict:
    items = [_DATA[step * BATCH_SIZE + i] for i in range(BATCH_SIZE)]
    return {"x": torch.stack([img for img, _ in items]), "target": torch.tensor([y for _, y in items])}


def loss_fn(out, batch) -> torch.Tensor:
    return F.cross_entropy(out.float(), batch["target"])
