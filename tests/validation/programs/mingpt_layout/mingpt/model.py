"""A minGPT-shaped model: the package sits at the repository root, the training script in projects/."""

import math

import torch
import torch.nn as nn
import torch.nn.functional as F

ATTENTION_SCALE = 1.0  # the seeded slip changes this in the migrated copy


class CausalSelfAttention(nn.Module):
    def __init__(self, n_embd=16, n_head=2, block_size=8):
        super().__init__()
        self.n_head = n_head
        self.c_attn = nn.Linear(n_embd, 3 * n_embd)
        self.c_proj = nn.Linear(n_embd, n_embd)
        self.register_buffer("bias", torch.tril(torch.ones(block_size, block_size)).view(1, 1, block_size, block_size))

    def forward(self, x):
        B, T, C = x.size()
        q, k, v = self.c_attn(x).split(C, dim=2)
        q, k, v = (t.view(B, T, self.n_head, C // self.n_head).transpose(1, 2) for t in (q, k, v))
        att = (q @ k.transpose(-2, -1)) * (ATTENTION_SCALE / math.sqrt(k.size(-1)))
        att = att.masked_fill(self.bias[:, :, :T, :T] == 0, float("-inf"))
        y = F.softmax(att, dim=-1) @ v
        return self.c_proj(y.transpose(1, 2).contiguous().view(B, T, C))


class GPT(nn.Module):
    def __init__(self, vocab_size=32, n_embd=16, block_size=8):
        super().__init__()
        self.wte = nn.Embedding(vocab_size, n_embd)
        self.wpe = nn.Embedding(block_size, n_embd)
        self.ln = nn.LayerNorm(n_embd)
        self.attn = CausalSelfAttention(n_embd, 2, block_size)
        self.head = nn.Linear(n_embd, vocab_size)

    def forward(self, idx):
        pos = torch.arange(idx.size(1), device=idx.device)
        x = self.wte(idx) + self.wpe(pos)
        x = x + self.attn(self.ln(x))
        return self.head(x)
