#!/usr/bin/env python3
"""Op-census benchmark: `migrate ops --trace --fake` on a full-size 7B decoder config.

    python3 bench/census_bench.py                      # plain-torch Llama-7B decoder, 3 runs
    python3 bench/census_bench.py --model transformers # transformers' LlamaForCausalLM (if installed)
    python3 bench/census_bench.py -n 1 --seq 4096

Writes a throw-away protocol tree (validate.py with the 7B config: 32 layers, hidden 4096, 32 heads,
FFN 11008, vocab 32000; batch 1 x --seq tokens) into a temp folder and traces one training step
(forward, backward, AdamW step) under FakeTensorMode through `migrator.api.trace_ops` (the program
runs in the census child). Prints per run: wall time of the whole call (child start-up and torch
import included), the child's own traced seconds, the child's peak RSS (`RUSAGE_CHILDREN`, so each
run is its own process: runs are separate invocations of this script with -n 1 when you want
per-run peaks) and the census size; then the median. Targets (reported, never asserted): <= 60 s,
< 2 GiB RSS. Exit status 0 when it ran, 2 when it could not.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

CONFIG = dict(n_layer=32, hidden=4096, n_head=32, ffn=11008, vocab=32000)

PLAIN = '''
import math
import torch
from torch import nn
import torch.nn.functional as F

CFG = {cfg!r}
SEQ = {seq}


class RMSNorm(nn.Module):
    def __init__(self, d, eps=1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(d))
        self.eps = eps

    def forward(self, x):
        x32 = x.float()
        return (x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + self.eps)).type_as(x) * self.weight


def rotary(x, cos, sin):
    x1, x2 = x.chunk(2, dim=-1)
    return x * cos + torch.cat((-x2, x1), dim=-1) * sin


class Block(nn.Module):
    def __init__(self, d, heads, ffn):
        super().__init__()
        self.heads = heads
        self.norm1, self.norm2 = RMSNorm(d), RMSNorm(d)
        self.qkv = nn.Linear(d, 3 * d, bias=False)
        self.wo = nn.Linear(d, d, bias=False)
        self.gate, self.up = nn.Linear(d, ffn, bias=False), nn.Linear(d, ffn, bias=False)
        self.down = nn.Linear(ffn, d, bias=False)

    def forward(self, x, cos, sin):
        B, T, D = x.shape
        q, k, v = self.qkv(self.norm1(x)).view(B, T, 3, self.heads, D // self.heads).unbind(2)
        q, k = rotary(q, cos, sin), rotary(k, cos, sin)
        y = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), is_causal=True)
        x = x + self.wo(y.transpose(1, 2).reshape(B, T, D))
        h = self.norm2(x)
        return x + self.down(F.silu(self.gate(h)) * self.up(h))


class Llama(nn.Module):
    def __init__(self):
        super().__init__()
        d, hd = CFG["hidden"], CFG["hidden"] // CFG["n_head"]
        self.embed = nn.Embedding(CFG["vocab"], d)
        self.blocks = nn.ModuleList(Block(d, CFG["n_head"], CFG["ffn"]) for _ in range(CFG["n_layer"]))
        self.norm = RMSNorm(d)
        self.head = nn.Linear(d, CFG["vocab"], bias=False)
        inv = 1.0 / (10000 ** (torch.arange(0, hd, 2).float() / hd))
        freqs = torch.outer(torch.arange(SEQ).float(), inv)
        emb = torch.cat((freqs, freqs), dim=-1)
        self.register_buffer("cos", emb.cos()[None, :, None, :], persistent=False)
        self.register_buffer("sin", emb.sin()[None, :, None, :], persistent=False)

    def forward(self, idx):
        x = self.embed(idx)
        for block in self.blocks:
            x = block(x, self.cos, self.sin)
        return self.head(self.norm(x))


def make_model(dropout=0.0):
    return Llama()
'''

TRANSFORMERS = '''
import torch
from transformers import LlamaConfig, LlamaForCausalLM

CFG = {cfg!r}
SEQ = {seq}


def make_model(dropout=0.0):
    config = LlamaConfig(hidden_size=CFG["hidden"], intermediate_size=CFG["ffn"], num_hidden_layers=CFG["n_layer"],
                         num_attention_heads=CFG["n_head"], num_key_value_heads=CFG["n_head"], vocab_size=CFG["vocab"],
                         max_position_embeddings=SEQ, attn_implementation="sdpa")
    return LlamaForCausalLM(config)
'''

COMMON = '''

INPUT_KEYS = ("input_ids",) if "transformers" in __doc__ else ("idx",)


def make_batch(step):
    g = torch.Generator().manual_seed(step)
    ids = torch.randint(0, CFG["vocab"], (1, SEQ + 1), generator=g)
    return {{"input_ids": ids[:, :-1], "idx": ids[:, :-1], "targets": ids[:, 1:]}}


def loss_fn(out, batch):
    logits = out.logits if hasattr(out, "logits") else out
    return torch.nn.functional.cross_entropy(logits.float().flatten(0, 1), batch["targets"].flatten())
'''


def write_tree(folder: Path, model: str, seq: int) -> Path:
    tree = folder / f"llama7b-{model}"
    tree.mkdir(parents=True, exist_ok=True)
    (tree / "pyproject.toml").write_text("[project]\nname = 'census-bench'\n")
    body = (PLAIN if model == "plain" else TRANSFORMERS).format(cfg=CONFIG, seq=seq)
    doc = f'"""7B decoder ({model}) for the census benchmark."""\n'
    (tree / "validate.py").write_text(doc + body + COMMON.format())
    return tree


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", "--reps", type=int, default=3)
    parser.add_argument("--model", choices=["plain", "transformers"], default="plain")
    parser.add_argument("--seq", type=int, default=2048)
    parser.add_argument("--timeout", type=float, default=600)
    args = parser.parse_args(argv)
    if args.model == "transformers":
        import importlib.util

        if importlib.util.find_spec("transformers") is None:
            print("transformers is not installed: pip install transformers==5.23.0", file=sys.stderr)
            return 2
    from migrator import api

    params = CONFIG["n_layer"] * (4 * CONFIG["hidden"] ** 2 + 3 * CONFIG["hidden"] * CONFIG["ffn"]) \
        + 2 * CONFIG["vocab"] * CONFIG["hidden"]
    print(f"7B decoder ({args.model}): {params / 1e9:.2f} B parameters, batch 1 x {args.seq} tokens, "
          f"FakeTensorMode, 1 step (forward, backward, AdamW)")
    walls, traced = [], []
    with tempfile.TemporaryDirectory(prefix="census-bench-") as tmp:
        tree = write_tree(Path(tmp), args.model, args.seq)
        for rep in range(args.reps):
            t0 = time.perf_counter()
            try:
                census, _, _ = api.trace_ops(tree, fake=True, timeout=args.timeout, write=False)
            except api.UsageError as exc:
                print(f"could not trace: {exc}", file=sys.stderr)
                return 2
            wall = time.perf_counter() - t0
            peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024  # KiB -> MiB (Linux)
            s = census.summary()
            walls.append(wall)
            traced.append(census.seconds)
            print(f"run {rep + 1}: {wall:6.1f} s wall ({census.seconds:.1f} s traced in the child), "
                  f"peak child RSS so far {peak:,.0f} MiB, {s['distinct']['api']} API + {s['distinct']['aten']} ATen "
                  f"distinct, {s['calls']:,} calls, findings {s['findings']}")
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    print(f"median wall {statistics.median(walls):.1f} s (traced {statistics.median(traced):.1f} s); "
          f"peak child RSS {peak:,.0f} MiB ({peak / 1024:.2f} GiB); targets <= 60 s, < 2 GiB; "
          f"cpu count {os.cpu_count()}, load {os.getloadavg()[0]:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
