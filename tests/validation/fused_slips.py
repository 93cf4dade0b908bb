"""A tiny eager-PyTorch block (issue 37 item 6) and its hand port to the torch_npu fused ops, for the
"cause in the user's words" tests: eager attention (matmul, ``* 1/sqrt(64)``, ``masked_fill`` with a
causal-and-padding keep-mask, softmax, matmul), GPT-J interleaved rotary, RMSNorm with ``eps`` 1e-5
on small activations (so an eps slip shows) and a SwiGLU MLP. The port uses ``npu_fusion_attention``
(a mask built its own way: ``triu`` OR padding, True = masked out), ``npu_rotary_mul(rotary_mode=
"interleave")``, ``npu_rms_norm`` and ``npu_swiglu``. Each slip is a text edit of the port (every
``old`` must be there: a changed port breaks the test loudly) with the cause phrase the report must give."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

ORIGINAL = '''
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

DIM, HEADS, HIDDEN, VOCAB, SEQ, BATCH = 128, 2, 96, 64, 8, 2
HEAD_DIM = DIM // HEADS  # 64: the original scales the scores by 1/sqrt(64) = 0.125


class RMSNorm(nn.Module):
    def __init__(self, dim, eps=1e-5):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        var = x.pow(2).mean(-1, keepdim=True)
        return self.weight * (x * torch.rsqrt(var + self.eps))


def rope_cache(seq, dim, base=10000.0):
    inv = 1.0 / (base ** (torch.arange(0, dim, 2).float() / dim))
    ang = torch.outer(torch.arange(seq).float(), inv)
    return ang.cos().repeat_interleave(2, -1), ang.sin().repeat_interleave(2, -1)  # GPT-J: one frequency per pair


def rotate_every_two(x):
    x1, x2 = x[..., ::2], x[..., 1::2]
    return torch.stack((-x2, x1), dim=-1).flatten(-2)


class Attention(nn.Module):
    def __init__(self):
        super().__init__()
        self.qkv = nn.Linear(DIM, 3 * DIM, bias=False)
        self.o = nn.Linear(DIM, DIM, bias=False)
        cos, sin = rope_cache(SEQ, HEAD_DIM)
        self.register_buffer("cos", cos, persistent=False)
        self.register_buffer("sin", sin, persistent=False)

    def forward(self, x, pad):
        B, S, _ = x.shape
        q, k, v = self.qkv(x).view(B, S, 3, HEADS, HEAD_DIM).permute(2, 0, 3, 1, 4).unbind(0)
        cos, sin = self.cos[:S], self.sin[:S]
        q = q * cos + rotate_every_two(q) * sin
        k = k * cos + rotate_every_two(k) * sin
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(HEAD_DIM))
        keep = torch.ones(S, S, dtype=torch.bool, device=x.device).tril()[None, None] & pad[:, None, None, :]
        att = torch.where(keep, att, float("-inf"))
        y = att.softmax(-1) @ v
        return self.o(y.transpose(1, 2).reshape(B, S, DIM))


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.gate = nn.Linear(DIM, HIDDEN, bias=False)
        self.up = nn.Linear(DIM, HIDDEN, bias=False)
        self.down = nn.Linear(HIDDEN, DIM, bias=False)

    def forward(self, x):
        return self.down(F.silu(self.gate(x)) * self.up(x))


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.attn_norm, self.attn = RMSNorm(DIM), Attention()
        self.mlp_norm, self.mlp = RMSNorm(DIM), MLP()

    def forward(self, x, pad):
        x = x + self.attn(self.attn_norm(x), pad)
        return x + self.mlp(self.mlp_norm(x))


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(VOCAB, DIM)
        nn.init.normal_(self.emb.weight, std=0.02)
        self.block = Block()
        self.head = nn.Linear(DIM, VOCAB, bias=False)

    def forward(self, idx, pad):
        return self.head(self.block(self.emb(idx), pad))


INPUT_KEYS = ("idx", "pad")


def make_model(dropout=0.0):
    return Model()


def make_batch(step):
    g = torch.Generator().manual_seed(100 + step)
    ids = torch.randint(0, VOCAB, (BATCH, SEQ + 1), generator=g)
    pad = torch.arange(SEQ)[None, :] < torch.tensor([SEQ, SEQ - 3])[:, None]  # right padding, True = token
    return {"idx": ids[:, :-1], "pad": pad, "targets": ids[:, 1:].masked_fill(~pad, -100)}


def loss_fn(out, batch):
    return F.cross_entropy(out.float().flatten(0, 1), batch["targets"].flatten(), ignore_index=-100)


def make_optimizer(model):
    return torch.optim.SGD(model.parameters(), lr=0.1)
'''

# the hand port: each (old, new) is applied to ORIGINAL
PORT = (
    ("import torch\n", "import torch\nimport torch_npu\n"),
    ("        var = x.pow(2).mean(-1, keepdim=True)\n"
     "        return self.weight * (x * torch.rsqrt(var + self.eps))\n",
     "        return torch_npu.npu_rms_norm(x, self.weight, epsilon=self.eps)[0]\n"),
    ("        q = q * cos + rotate_every_two(q) * sin\n"
     "        k = k * cos + rotate_every_two(k) * sin\n",
     "        q = torch_npu.npu_rotary_mul(q, cos, sin, rotary_mode=\"interleave\")\n"
     "        k = torch_npu.npu_rotary_mul(k, cos, sin, rotary_mode=\"interleave\")\n"),
    ("        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(HEAD_DIM))\n"
     "        keep = torch.ones(S, S, dtype=torch.bool, device=x.device).tril()[None, None] & pad[:, None, None, :]\n"
     "        att = torch.where(keep, att, float(\"-inf\"))\n"
     "        y = att.softmax(-1) @ v\n",
     "        future = torch.triu(torch.ones(S, S, dtype=torch.bool, device=x.device), diagonal=1)\n"
     "        mask = future[None, None] | ~pad[:, None, None, :]  # npu: True = masked out\n"
     "        y = torch_npu.npu_fusion_attention(q, k, v, HEADS, \"BNSD\", atten_mask=mask,\n"
     "                                           scale=1.0 / math.sqrt(HEAD_DIM))[0]\n"),
    ("        return self.down(F.silu(self.gate(x)) * self.up(x))\n",
     "        return self.down(torch_npu.npu_swiglu(torch.cat([self.gate(x), self.up(x)], -1), dim=-1))\n"),
)


@dataclass(frozen=True)
class Slip:
    name: str
    edits: tuple[tuple[str, str], ...]  # applied to the port
    what: str
    cause: tuple[str, ...]  # every one must be in the validate output


SLIPS = (
    Slip("scale_omitted", (("atten_mask=mask,\n                                           scale=1.0 / math.sqrt(HEAD_DIM))",
                            "atten_mask=mask)"),),
         "npu_fusion_attention without scale: its default 1.0, not 1/sqrt(64)",
         ("scale: the port uses 1.0 (npu_fusion_attention's default), the original 0.125 (= 1/sqrt(64))",
          "pass scale=1/math.sqrt(head_dim)")),
    Slip("mask_omitted", (("atten_mask=mask,\n", "\n"),), "npu_fusion_attention with no atten_mask",
         ("mask omitted: the port attends to future and padded positions",)),
    Slip("mask_inverted", (("mask = future[None, None] | ~pad[:, None, None, :]",
                            "mask = ~future[None, None] & pad[:, None, None, :]"),),
         "the original's keep-mask (True = attend) passed as atten_mask (True = masked out)",
         ("mask inverted: the port passes a keep-mask (True = attend) as atten_mask", "pass ~mask")),
    Slip("swiglu_swapped", (("torch.cat([self.gate(x), self.up(x)], -1)", "torch.cat([self.up(x), self.gate(x)], -1)"),),
         "npu_swiglu input concatenated up first: it activates the up projection",
         ("SwiGLU halves swapped: the port activates the up projection",)),
    Slip("rotary_mode", (('rotary_mode="interleave")\n', ")\n"),),
         "npu_rotary_mul without rotary_mode: its default rotate-half (NeoX) on GPT-J interleaved pairs",
         ("rotary layout: the port uses rotate-half (NeoX), the original interleaved pairs (GPT-J)",
          "rotary_mode=\"interleave\"")),
    Slip("rms_eps", (("epsilon=self.eps)[0]", ")[0]"),), "npu_rms_norm without epsilon: its 1e-6 default, not 1e-5",
         ("RMSNorm eps: the port uses 1e-06 (npu_rms_norm's default), the original 1e-05", "pass epsilon=1e-05")),
)


def _edit(text: str, edits: tuple[tuple[str, str], ...]) -> str:
    for old, new in edits:
        assert old in text, f"{old!r} not in the program"
        text = text.replace(old, new)
    return text


def write(root: Path, name: str, *edits: tuple[str, str], port: bool = False) -> Path:
    """``root/name/validate.py``: the original (``port``: the hand port), then ``edits``."""
    tree = root / name
    tree.mkdir(parents=True)
    text = _edit(ORIGINAL, PORT) if port else ORIGINAL
    (tree / "validate.py").write_text(_edit(text, edits))
    return tree
