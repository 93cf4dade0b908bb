"""SwiGLU MLP (issue 42 fixture): one gate_up projection, chunk -> SiLU -> mul."""

import torch
import torch.nn.functional as F
from torch import nn

DIM, HIDDEN, BATCH, SEQ = 16, 24, 2, 4


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.gate_up = nn.Linear(DIM, 2 * HIDDEN, bias=False)
        self.down = nn.Linear(HIDDEN, DIM, bias=False)

    def forward(self, x):
        gate, up = self.gate_up(x).chunk(2, dim=-1)
        return self.down(F.silu(gate) * up)


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.mlp = MLP()
        self.head = nn.Linear(DIM, 4, bias=False)

    def forward(self, x):
        return self.head(self.mlp(x))


INPUT_KEYS = ("x",)


def make_model(dropout=0.0):
    return Model()


def make_batch(step):
    g = torch.Generator().manual_seed(20 + step)
    return {"x": torch.randn(BATCH, SEQ, DIM, generator=g), "y": torch.randint(0, 4, (BATCH * SEQ,), generator=g)}


def loss_fn(out, batch):
    return F.cross_entropy(out.float().flatten(0, 1), batch["y"])


def make_optimizer(model):
    return torch.optim.SGD(model.parameters(), lr=0.1)
