"""NeoX rotary embedding (issue 42 fixture): rotate_half (chunk -> neg -> cat), x * cos + rotate_half(x) * sin,
on (B, N, S, D) queries with cos/sin as NeoX builds them (cat([f, f]))."""

import torch
import torch.nn.functional as F
from torch import nn

HEADS, HEAD_DIM, BATCH, SEQ = 2, 8, 2, 4


def rotate_half(x):
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)


def apply_rotary_pos_emb(q, cos, sin):
    return (q * cos) + (rotate_half(q) * sin)


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.q = nn.Linear(HEAD_DIM, HEAD_DIM, bias=False)
        self.head = nn.Linear(HEAD_DIM, 4, bias=False)
        inv = 1.0 / (10000.0 ** (torch.arange(0, HEAD_DIM, 2).float() / HEAD_DIM))
        freqs = torch.outer(torch.arange(SEQ).float(), inv)
        emb = torch.cat((freqs, freqs), dim=-1)
        self.register_buffer("cos", emb.cos()[None, None], persistent=False)
        self.register_buffer("sin", emb.sin()[None, None], persistent=False)

    def forward(self, x):
        q = apply_rotary_pos_emb(self.q(x), self.cos, self.sin)
        return self.head(q)


INPUT_KEYS = ("x",)


def make_model(dropout=0.0):
    return Model()


def make_batch(step):
    g = torch.Generator().manual_seed(30 + step)
    x = torch.randn(BATCH, HEADS, SEQ, HEAD_DIM, generator=g)
    return {"x": x, "y": torch.randint(0, 4, (BATCH * HEADS * SEQ,), generator=g)}


def loss_fn(out, batch):
    return F.cross_entropy(out.float().flatten(0, 2), batch["y"])


def make_optimizer(model):
    return torch.optim.SGD(model.parameters(), lr=0.1)
