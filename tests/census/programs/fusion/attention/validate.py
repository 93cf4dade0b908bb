"""Eager masked attention (issue 42 fixture): q @ k^T, * 1/sqrt(D), masked_fill of a causal buffer, softmax,
@ v, on (B, N, S, D) inputs (nanoGPT's order, no dropout)."""

import math

import torch
import torch.nn.functional as F
from torch import nn

HEADS, HEAD_DIM, BATCH, SEQ = 2, 8, 2, 4


class Attention(nn.Module):
    def __init__(self):
        super().__init__()
        self.q = nn.Linear(HEAD_DIM, HEAD_DIM, bias=False)
        self.k = nn.Linear(HEAD_DIM, HEAD_DIM, bias=False)
        self.v = nn.Linear(HEAD_DIM, HEAD_DIM, bias=False)
        self.register_buffer("bias", torch.tril(torch.ones(SEQ, SEQ)).view(1, 1, SEQ, SEQ), persistent=False)

    def forward(self, x):
        q, k, v = self.q(x), self.k(x), self.v(x)
        T = q.size(-2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
        att = att.masked_fill(self.bias[:, :, :T, :T] == 0, float("-inf"))
        att = F.softmax(att, dim=-1)
        return att @ v


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.attn = Attention()
        self.head = nn.Linear(HEAD_DIM, 4, bias=False)

    def forward(self, x):
        return self.head(self.attn(x))


INPUT_KEYS = ("x",)


def make_model(dropout=0.0):
    return Model()


def make_batch(step):
    g = torch.Generator().manual_seed(40 + step)
    x = torch.randn(BATCH, HEADS, SEQ, HEAD_DIM, generator=g)
    return {"x": x, "y": torch.randint(0, 4, (BATCH * HEADS * SEQ,), generator=g)}


def loss_fn(out, batch):
    return F.cross_entropy(out.float().flatten(0, 2), batch["y"])


def make_optimizer(model):
    return torch.optim.SGD(model.parameters(), lr=0.1)
