"""`migrate plan`'s memory estimate against the measured peak of one training step, on CPU.

A Megatron-style GPT (LayerNorm, fused QKV, eager softmax attention with dropout, GELU MLP of width 4h,
tied embeddings; fp32, Adam) runs two steps; the second (steady state: Adam's moments exist, gradients kept
with zero_grad(set_to_none=False)) is profiled with torch.profiler's memory timeline and its peak allocated
bytes compared with migrator.plan.cost: model state 16 bytes per parameter (fp32 Adam: 4 weight + 4 gradient
+ 8 moments, the same 16 as mixed-precision Adam) + Korthikanti activations with 4-byte values + the backward working set (one more layer's activations;
migrator.plan.cost.working_bytes).

Usage: python bench/plan_memory_cpu.py     (prints the figures; needs torch; exit 0 always)
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from migrator.plan.cost import Layout, activation_bytes, model_state_bytes, working_bytes
from migrator.plan.model import ModelShape

CONFIGS = [  # layers, hidden, heads, seq, micro-batch, vocab
    (4, 256, 8, 256, 2, 512),
    (6, 384, 6, 128, 4, 512),
    (2, 512, 8, 512, 1, 1024),
]
DROPOUT = 0.1


class Block(nn.Module):
    def __init__(self, h: int, a: int):
        super().__init__()
        self.a = a
        self.ln1, self.ln2 = nn.LayerNorm(h), nn.LayerNorm(h)
        self.qkv, self.proj = nn.Linear(h, 3 * h), nn.Linear(h, h)
        self.fc1, self.fc2 = nn.Linear(h, 4 * h), nn.Linear(4 * h, h)

    def forward(self, x):  # x: [s, b, h], Megatron's layout
        s, b, h = x.shape
        q, k, v = self.qkv(self.ln1(x)).view(s, b * self.a, 3, h // self.a).unbind(2)
        q, k, v = (t.transpose(0, 1) for t in (q, k, v))                    # [b a, s, d]
        scores = torch.bmm(q * (1 / math.sqrt(h // self.a)), k.transpose(1, 2))
        mask = torch.ones(s, s, dtype=torch.bool).triu(1)
        probs = F.dropout(scores.masked_fill(mask, float("-inf")).softmax(-1), DROPOUT, True)
        y = torch.bmm(probs, v).transpose(0, 1).reshape(s, b, h)
        x = x + F.dropout(self.proj(y), DROPOUT, True)
        return x + F.dropout(self.fc2(F.gelu(self.fc1(self.ln2(x)))), DROPOUT, True)


class GPT(nn.Module):
    def __init__(self, layers: int, h: int, a: int, vocab: int):
        super().__init__()
        self.emb = nn.Embedding(vocab, h)
        self.blocks = nn.ModuleList(Block(h, a) for _ in range(layers))
        self.ln = nn.LayerNorm(h)

    def forward(self, idx):
        x = self.emb(idx).transpose(0, 1)
        for blk in self.blocks:
            x = blk(x)
        return self.ln(x) @ self.emb.weight.t()  # tied head, [s, b, V]


def peak_bytes(model, idx, targets) -> int:
    from torch.profiler import ProfilerActivity, profile
    from torch.profiler._memory_profiler import MemoryProfileTimeline

    opt = torch.optim.Adam(model.parameters())

    def step():
        opt.zero_grad(set_to_none=False)
        F.cross_entropy(model(idx).flatten(0, 1), targets.t().flatten()).backward()
        opt.step()

    step()
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True, record_shapes=True, with_stack=True) as prof:
        step()
    _, sizes = MemoryProfileTimeline(prof._memory_profile())._coalesce_timeline(torch.device("cpu"))
    return int(max(sum(row) for row in sizes))


def main() -> int:
    torch.manual_seed(0)
    print(f"{'layers':>6} {'h':>4} {'a':>2} {'s':>4} {'b':>2} {'state MB':>9} {'act+ws MB':>9} {'estimate':>9} "
          f"{'measured':>9} {'error':>7}")
    for layers, h, a, s, b, vocab in CONFIGS:
        model = GPT(layers, h, a, vocab)
        shape = ModelShape("bench", layers, h, a, a, 4 * h, vocab)
        layout = Layout(zero=0, recompute="none", micro_batch=b)
        state = sum(model_state_bytes(shape, layout).values())
        act = activation_bytes(shape, layout, s, 1, "eager", value_bytes=4, dropout=True) + \
            working_bytes(shape, layout, s, "eager", value_bytes=4, dropout=True)
        idx = torch.randint(0, vocab, (b, s))
        measured = peak_bytes(model, idx, torch.randint(0, vocab, (b, s)))
        est = state + act
        print(f"{layers:>6} {h:>4} {a:>2} {s:>4} {b:>2} {state / 1e6:>9.1f} {act / 1e6:>9.1f} {est / 1e6:>9.1f} "
              f"{measured / 1e6:>9.1f} {est / measured - 1:>+7.1%}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
