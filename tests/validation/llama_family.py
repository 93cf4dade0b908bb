"""A program family the samples do not have (issue 24 item 7): a tiny GQA + RoPE + RMSNorm + SwiGLU model
with its protocol, and its hand port to the fused NPU ops (``npu_rms_norm``, ``npu_swiglu``,
``npu_fusion_attention``) — written the way a person ports it, not by ``migrate fix``. Slips are text edits
of the port (every ``old`` must be there: a changed port breaks the test loudly)."""

from __future__ import annotations

from pathlib import Path

ORIGINAL = '''
import torch
import torch.nn as nn
import torch.nn.functional as F

DIM, HEADS, KV_HEADS, HIDDEN, VOCAB, SEQ = 32, 4, 2, 48, 64, 8
ATTN_DROPOUT = 0.0  # the attention's own dropout: make_model's argument does not reach it


class RMSNorm(nn.Module):
    def __init__(self, dim, eps=1e-5):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        var = x.float().pow(2).mean(-1, keepdim=True)
        return (x.float() * torch.rsqrt(var + self.eps)).to(x.dtype) * self.weight


def rope_cache(seq, dim, base=10000.0):
    inv = 1.0 / (base ** (torch.arange(0, dim, 2).float() / dim))
    ang = torch.outer(torch.arange(seq).float(), inv)
    emb = torch.cat([ang, ang], -1)
    return emb.cos(), emb.sin()


def rotate_half(x):
    a, b = x.chunk(2, -1)
    return torch.cat([-b, a], -1)


class Attention(nn.Module):
    def __init__(self):
        super().__init__()
        self.hd = DIM // HEADS
        self.q = nn.Linear(DIM, HEADS * self.hd, bias=False)
        self.k = nn.Linear(DIM, KV_HEADS * self.hd, bias=False)
        self.v = nn.Linear(DIM, KV_HEADS * self.hd, bias=False)
        self.o = nn.Linear(DIM, DIM, bias=False)
        cos, sin = rope_cache(SEQ, self.hd)
        self.register_buffer("cos", cos, persistent=False)
        self.register_buffer("sin", sin, persistent=False)

    def forward(self, x):
        B, S, _ = x.shape
        q = self.q(x).view(B, S, HEADS, self.hd).transpose(1, 2)
        k = self.k(x).view(B, S, KV_HEADS, self.hd).transpose(1, 2)
        v = self.v(x).view(B, S, KV_HEADS, self.hd).transpose(1, 2)
        cos, sin = self.cos[:S], self.sin[:S]
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        k = k.repeat_interleave(HEADS // KV_HEADS, dim=1)
        v = v.repeat_interleave(HEADS // KV_HEADS, dim=1)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True,
                                           dropout_p=ATTN_DROPOUT if self.training else 0.0)
        return self.o(y.transpose(1, 2).reshape(B, S, DIM))


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.gate = nn.Linear(DIM, HIDDEN, bias=False)
        self.up = nn.Linear(DIM, HIDDEN, bias=False)
        self.down = nn.Linear(HIDDEN, DIM, bias=False)
        self.act_fn = nn.SiLU()

    def forward(self, x):
        return self.down(self.act_fn(self.gate(x)) * self.up(x))


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.attn_norm, self.attn = RMSNorm(DIM), Attention()
        self.mlp_norm, self.mlp = RMSNorm(DIM), MLP()

    def forward(self, x):
        x = x + self.attn(self.attn_norm(x))
        return x + self.mlp(self.mlp_norm(x))


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(VOCAB, DIM)
        self.blocks = nn.ModuleList([Block() for _ in range(2)])
        self.norm = RMSNorm(DIM)
        self.head = nn.Linear(DIM, VOCAB, bias=False)

    def forward(self, idx):
        x = self.emb(idx)
        for block in self.blocks:
            x = block(x)
        return self.head(self.norm(x))


INPUT_KEYS = ("idx",)


def make_model(dropout=0.0):
    return Model()


def make_batch(step):
    g = torch.Generator().manual_seed(step)
    ids = torch.randint(0, VOCAB, (4, SEQ + 1), generator=g)
    return {"idx": ids[:, :-1], "targets": ids[:, 1:]}


def loss_fn(out, batch):
    return F.cross_entropy(out.float().flatten(0, 1), batch["targets"].flatten())


def make_optimizer(model):
    return torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.1)


def train_step(model, optimizer, loss, scaler):
    if scaler is not None:
        scaler.scale(loss).backward()
        scaler.unscale_(optimizer)
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        scaler.step(optimizer)
        scaler.update()
    else:
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
    optimizer.zero_grad(set_to_none=True)
'''

# the hand port: each (old, new) is applied to ORIGINAL
PORT = (
    ("import torch\n", "import torch\nimport torch_npu\n"),
    ("        var = x.float().pow(2).mean(-1, keepdim=True)\n"
     "        return (x.float() * torch.rsqrt(var + self.eps)).to(x.dtype) * self.weight\n",
     "        return torch_npu.npu_rms_norm(x, self.weight, epsilon=self.eps)[0]\n"),
    ("        k = k.repeat_interleave(HEADS // KV_HEADS, dim=1)\n"
     "        v = v.repeat_interleave(HEADS // KV_HEADS, dim=1)\n"
     "        y = F.scaled_dot_product_attention(q, k, v, is_causal=True,\n"
     "                                           dropout_p=ATTN_DROPOUT if self.training else 0.0)\n",
     "        q, k = q.to(v.dtype), k.to(v.dtype)  # RoPE ran in fp32 (its caches); the kernel wants one dtype\n"
     "        mask = torch.triu(torch.ones(S, S, dtype=torch.bool, device=x.device), diagonal=1)\n"
     "        y = torch_npu.npu_fusion_attention(q, k, v, HEADS, \"BNSD\", atten_mask=mask, scale=self.hd ** -0.5,\n"
     "                                           keep_prob=1.0 - (ATTN_DROPOUT if self.training else 0.0))[0]\n"),
    ("        return self.down(self.act_fn(self.gate(x)) * self.up(x))\n",
     "        return self.down(torch_npu.npu_swiglu(torch.cat([self.gate(x), self.up(x)], -1), dim=-1))\n"),
)

ATTN_DROPOUT_ON = ("ATTN_DROPOUT = 0.0", "ATTN_DROPOUT = 0.1")
SCALER = '''

def make_scaler():
    return torch.amp.GradScaler("cpu", init_scale=256.0, growth_interval=2)
'''


def _edit(text: str, edits) -> str:
    for old, new in edits:
        assert old in text, f"{old!r} not in the program"
        text = text.replace(old, new)
    return text


def write(root: Path, name: str, *edits: tuple[str, str], port: bool = False, extra: str = "") -> Path:
    """``root/name/validate.py``: the original (``port``: the hand port), then ``edits``, then ``extra``."""
    tree = root / name
    tree.mkdir(parents=True)
    text = _edit(ORIGINAL, PORT) if port else ORIGINAL
    (tree / "validate.py").write_text(_edit(text, edits) + extra)
    return tree
