"""LLaMA-style RMSNorm (issue 42 fixture): pow -> mean -> add eps -> rsqrt -> mul -> weight.
Small activations, so eps (1e-5) matters against npu_rms_norm's 1e-6 default."""

import torch
import torch.nn.functional as F
from torch import nn

DIM, BATCH, SEQ = 32, 2, 4


class RMSNorm(nn.Module):
    def __init__(self, dim, eps=1e-5):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.variance_epsilon = eps

    def forward(self, hidden_states):
        variance = hidden_states.pow(2).mean(-1, keepdim=True)
        hidden_states = hidden_states * torch.rsqrt(variance + self.variance_epsilon)
        return self.weight * hidden_states


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(DIM, DIM, bias=False)
        self.norm = RMSNorm(DIM)
        self.head = nn.Linear(DIM, 4, bias=False)

    def forward(self, x):
        return self.head(self.norm(self.proj(x)))


INPUT_KEYS = ("x",)


def make_model(dropout=0.0):
    return Model()


def make_batch(step):
    g = torch.Generator().manual_seed(10 + step)
    return {"x": torch.randn(BATCH, SEQ, DIM, generator=g) * 1e-3, "y": torch.randint(0, 4, (BATCH * SEQ,), generator=g)}


def loss_fn(out, batch):
    return F.cross_entropy(out.float().flatten(0, 1), batch["y"])


def make_optimizer(model):
    return torch.optim.SGD(model.parameters(), lr=0.1)
