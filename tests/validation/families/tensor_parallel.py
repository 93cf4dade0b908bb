"""Family "tensor_parallel": a tiny Llama-style decoder (RoPE caches as buffers, causal attention, a fused
gate/up SwiGLU MLP with biases) whose ``parallelize(model, mesh, "tp")`` swaps its projections for a
column/row-parallel linear pair, checked in S3 (2 ranks) against the unsharded model.

Source: huggingface/picotron, ``picotron/tensor_parallel/tensor_parallel.py`` (``apply_tensor_parallel``,
``ColumnParallelLinear``, ``RowParallelLinear``) and ``tp_communications.py`` (copy / reduce regions),
https://github.com/huggingface/picotron (Apache-2.0); the shards are cut from the full model built with
one seed on every rank (the harness's convention) instead of a master weight per rank, a fused gate/up
weight is split per part, and the residual projections get Megatron's scaled init (std / sqrt(2 L)).
Hand port: ``npu_rms_norm``, ``npu_rotary_mul``, ``npu_fusion_attention`` with a bool causal mask,
``npu_swiglu`` on the fused gate/up output."""

from __future__ import annotations

from .harness import Family, Variant

ORIGINAL = '''
import math

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F

DIM, HEADS, HIDDEN, VOCAB, SEQ, BATCH, N_LAYER = 32, 4, 64, 64, 8, 2, 2
HEAD_DIM = DIM // HEADS
ROPE_THETA, INIT_STD, ADAM_EPS = 500.0, 0.02, 1e-5


class RMSNorm(nn.Module):
    def __init__(self, dim, eps=1e-5):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        var = x.pow(2).mean(-1, keepdim=True)
        return self.weight * (x * torch.rsqrt(var + self.eps))


def rotate_half(x):
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)


class CopyToModelParallelRegion(torch.autograd.Function):
    """Identity forward; all-reduce of the input grad backward (the input is replicated over TP)."""

    @staticmethod
    def forward(ctx, x, group):
        ctx.group = group
        return x.view_as(x)

    @staticmethod
    def backward(ctx, grad):
        grad = grad.contiguous()
        dist.all_reduce(grad, group=ctx.group)
        return grad, None


class ReduceFromModelParallelRegion(torch.autograd.Function):
    """All-reduce forward (sum of partial products); identity backward."""

    @staticmethod
    def forward(ctx, x, group):
        x = x.contiguous()
        dist.all_reduce(x, group=group)
        return x

    @staticmethod
    def backward(ctx, grad):
        return grad, None


class ColumnParallelLinear(nn.Module):
    """Y_i = X W_i^T + b_i: output features split over TP; a fused weight (parts > 1) splits each part."""

    def __init__(self, linear, group, parts=1):
        super().__init__()
        self.group = group
        tp, rank = dist.get_world_size(group), dist.get_rank(group)

        def shard(t):
            return torch.cat([c.chunk(tp, dim=0)[rank] for c in t.detach().chunk(parts, dim=0)]).clone()

        self.weight = nn.Parameter(shard(linear.weight))
        self.weight.tp_shard = (0, parts)
        self.bias = None
        if linear.bias is not None:
            self.bias = nn.Parameter(shard(linear.bias))
            self.bias.tp_shard = (0, parts)

    def forward(self, x):
        return F.linear(CopyToModelParallelRegion.apply(x, self.group), self.weight, self.bias)


class RowParallelLinear(nn.Module):
    """Y = sum_i X_i W_i^T + b: input features split over TP, the partial outputs all-reduced, the bias once."""

    def __init__(self, linear, group):
        super().__init__()
        self.group = group
        tp, rank = dist.get_world_size(group), dist.get_rank(group)
        self.weight = nn.Parameter(linear.weight.detach().chunk(tp, dim=1)[rank].clone())
        self.weight.tp_shard = (1, 1)
        self.bias = None if linear.bias is None else nn.Parameter(linear.bias.detach().clone())

    def forward(self, x):
        output = ReduceFromModelParallelRegion.apply(F.linear(x, self.weight), self.group)
        return output if self.bias is None else output + self.bias


class Attention(nn.Module):
    def __init__(self, rope_theta=10000.0):
        super().__init__()
        self.q_proj = nn.Linear(DIM, DIM, bias=False)
        self.k_proj = nn.Linear(DIM, DIM, bias=False)
        self.v_proj = nn.Linear(DIM, DIM, bias=False)
        self.out_proj = nn.Linear(DIM, DIM, bias=False)
        inv_freq = 1.0 / (rope_theta ** (torch.arange(0, HEAD_DIM, 2).float() / HEAD_DIM))
        emb = torch.outer(torch.arange(SEQ).float(), inv_freq).repeat(1, 2)
        self.register_buffer("cos", emb.cos(), persistent=False)
        self.register_buffer("sin", emb.sin(), persistent=False)

    def forward(self, x):
        B, S, _ = x.shape
        q = self.q_proj(x).view(B, S, -1, HEAD_DIM).transpose(1, 2)  # local heads under TP
        k = self.k_proj(x).view(B, S, -1, HEAD_DIM).transpose(1, 2)
        v = self.v_proj(x).view(B, S, -1, HEAD_DIM).transpose(1, 2)
        cos, sin = self.cos[:S], self.sin[:S]
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.out_proj(y.transpose(1, 2).reshape(B, S, -1))


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.gate_up_proj = nn.Linear(DIM, 2 * HIDDEN, bias=True)
        self.down_proj = nn.Linear(HIDDEN, DIM, bias=True)

    def forward(self, x):
        gate, up = self.gate_up_proj(x).chunk(2, dim=-1)
        return self.down_proj(F.silu(gate) * up)


class DecoderLayer(nn.Module):
    def __init__(self):
        super().__init__()
        self.input_layernorm, self.attention = RMSNorm(DIM), Attention(rope_theta=ROPE_THETA)
        self.post_attention_layernorm, self.mlp = RMSNorm(DIM), MLP()

    def forward(self, x):
        x = x + self.attention(self.input_layernorm(x))
        return x + self.mlp(self.post_attention_layernorm(x))


class Llama(nn.Module):
    def __init__(self, init_std=0.02):
        super().__init__()
        self.embedding = nn.Embedding(VOCAB, DIM)
        self.decoder_layers = nn.ModuleList([DecoderLayer() for _ in range(N_LAYER)])
        self.final_norm = RMSNorm(DIM)
        self.final_proj = nn.Linear(DIM, VOCAB, bias=False)
        for name, p in self.named_parameters():
            if p.dim() < 2:
                continue
            std = init_std / math.sqrt(2.0 * N_LAYER) if name.endswith(("out_proj.weight", "down_proj.weight")) else init_std
            nn.init.normal_(p, mean=0.0, std=std)

    def forward(self, input_ids):
        x = self.embedding(input_ids)
        for layer in self.decoder_layers:
            x = layer(x)
        return self.final_proj(self.final_norm(x))


def apply_tensor_parallel(model, group):
    plan = [("attention", "q_proj", "column", 1), ("attention", "k_proj", "column", 1),
            ("attention", "v_proj", "column", 1), ("attention", "out_proj", "row", 1),
            ("mlp", "gate_up_proj", "column", 2), ("mlp", "down_proj", "row", 1)]
    for layer in model.decoder_layers:
        for module_name, proj, style, parts in plan:
            module = getattr(layer, module_name)
            linear = getattr(module, proj)
            new = ColumnParallelLinear(linear, group, parts) if style == "column" else RowParallelLinear(linear, group)
            setattr(module, proj, new)
    return model


INPUT_KEYS = ("input_ids",)


def make_model(dropout=0.0):
    return Llama(init_std=INIT_STD)


def make_batch(step, rank=0, world_size=1):
    g = torch.Generator().manual_seed(50 + step)  # TP: every rank gets the same batch
    ids = torch.randint(0, VOCAB, (BATCH, SEQ + 1), generator=g)
    return {"input_ids": ids[:, :-1], "targets": ids[:, 1:]}


def loss_fn(out, batch):
    return F.cross_entropy(out.float().flatten(0, 1), batch["targets"].flatten())


def make_optimizer(model):
    return torch.optim.AdamW(model.parameters(), lr=1e-3, eps=ADAM_EPS, weight_decay=0.01)


def make_scaler():
    return torch.cuda.amp.GradScaler(init_scale=2.0**10)


def train_step(model, optimizer, loss, scaler):
    scaler.scale(loss).backward()
    scaler.unscale_(optimizer)
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    scaler.step(optimizer)
    scaler.update()
    optimizer.zero_grad(set_to_none=True)


def parallelize(model, mesh, stage):
    if stage != "tp":
        raise ValueError(f"this program is tensor parallel only, not {stage!r}")
    return apply_tensor_parallel(model, mesh.get_group() if hasattr(mesh, "get_group") else mesh)
'''

PORT = (
    ("import torch\n", "import torch\nimport torch_npu\n"),
    ("        var = x.pow(2).mean(-1, keepdim=True)\n"
     "        return self.weight * (x * torch.rsqrt(var + self.eps))\n",
     "        return torch_npu.npu_rms_norm(x, self.weight, epsilon=self.eps)[0]\n"),
    ("        q = q * cos + rotate_half(q) * sin\n"
     "        k = k * cos + rotate_half(k) * sin\n"
     "        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)\n",
     "        q = torch_npu.npu_rotary_mul(q, cos[None, None], sin[None, None])\n"
     "        k = torch_npu.npu_rotary_mul(k, cos[None, None], sin[None, None])\n"
     "        future = torch.triu(torch.ones(S, S, dtype=torch.bool, device=x.device), diagonal=1)  # True = masked out\n"
     "        y = torch_npu.npu_fusion_attention(q, k, v, q.shape[1], \"BNSD\", atten_mask=future,\n"
     "                                           scale=1.0 / math.sqrt(HEAD_DIM))[0]\n"),
    ("        gate, up = self.gate_up_proj(x).chunk(2, dim=-1)\n"
     "        return self.down_proj(F.silu(gate) * up)\n",
     "        return self.down_proj(torch_npu.npu_swiglu(self.gate_up_proj(x), dim=-1))\n"),
    ("    return torch.cuda.amp.GradScaler(init_scale=2.0**10)", "    return torch.npu.amp.GradScaler(init_scale=2.0**10)"),
)

VARIANTS = (
    Variant("fix_port", "fix", what="migrate fix on the original"),
    Variant("hand_port", "hand", what="npu_rms_norm, npu_rotary_mul, npu_fusion_attention, npu_swiglu"),
    Variant("row_bias_fused_linear", "refactor", (
        ("        output = ReduceFromModelParallelRegion.apply(F.linear(x, self.weight), self.group)\n"
         "        return output if self.bias is None else output + self.bias\n",
         "        output = ReduceFromModelParallelRegion.apply(x @ self.weight.t(), self.group)\n"
         "        return output if self.bias is None else torch.addmm(self.bias, output.flatten(0, -2),\n"
         "                                                             torch.eye(output.shape[-1])).view_as(output)\n"),),
        what="row-parallel matmul by @ and the bias added after the reduction through addmm"),
    Variant("qkv_one_matmul", "refactor", (
        ("        q = self.q_proj(x).view(B, S, -1, HEAD_DIM).transpose(1, 2)  # local heads under TP\n"
         "        k = self.k_proj(x).view(B, S, -1, HEAD_DIM).transpose(1, 2)\n"
         "        v = self.v_proj(x).view(B, S, -1, HEAD_DIM).transpose(1, 2)\n",
         "        qkv = torch.stack([self.q_proj(x), self.k_proj(x), self.v_proj(x)])  # (3, B, S, local dim)\n"
         "        q, k, v = qkv.view(3, B, S, -1, HEAD_DIM).transpose(2, 3).unbind(0)\n"),),
        what="q, k, v stacked and split once"),
    Variant("residual_inplace", "refactor", (
        ("        x = x + self.attention(self.input_layernorm(x))\n"
         "        return x + self.mlp(self.post_attention_layernorm(x))\n",
         "        h = x.clone()\n"
         "        h += self.attention(self.input_layernorm(x))\n"
         "        out = h.clone()\n"
         "        out += self.mlp(self.post_attention_layernorm(h))\n"
         "        return out\n"),),
        what="residual adds in place on copies of the (fp32) residual stream"),
    Variant("scaled_init_ignored", "slip", (
        ("std = init_std / math.sqrt(2.0 * N_LAYER) if name.endswith", "std = init_std if name.endswith"),),
        "init", ("down_proj (Linear).weight",), "the residual projections' scaled init (std / sqrt(2 L)) dropped"),
    Variant("rope_theta_ignored", "slip", (
        ("self.input_layernorm, self.attention = RMSNorm(DIM), Attention(rope_theta=ROPE_THETA)",
         "self.input_layernorm, self.attention = RMSNorm(DIM), Attention()"),),
        "buffers", ("attention", "cos"), "RoPE caches built with the default theta 10000, not the configured 500"),
    Variant("adam_eps_default", "slip", (("lr=1e-3, eps=ADAM_EPS, weight_decay=0.01", "lr=1e-3, weight_decay=0.01"),),
            "optimizer", ("optimizer", "eps"), "AdamW eps left at 1e-8 instead of 1e-5"),
    Variant("causal_off_by_one", "slip", (("torch.ones(S, S, dtype=torch.bool, device=x.device), diagonal=1)",
                                          "torch.ones(S, S, dtype=torch.bool, device=x.device), diagonal=2)"),),
            "masks", ("attention", "npu_fusion_attention"), "causal mask off by one: each token sees the next"),
    Variant("rotary_on_wrong_layout", "slip", (
        ("        q = torch_npu.npu_rotary_mul(q, cos[None, None], sin[None, None])\n",
         "        q = torch_npu.npu_rotary_mul(q, cos[None, None], sin[None, None], rotary_mode=\"interleave\")\n"),),
        "fused", ("attention", "rotary"), "npu_rotary_mul on q with the interleaved (GPT-J) mode on rotate-half caches"),
    Variant("column_grad_not_reduced", "slip", (
        ("        grad = grad.contiguous()\n        dist.all_reduce(grad, group=ctx.group)\n        return grad, None\n",
         "        return grad, None\n"),),
        "parallel", ("post_attention_layernorm", "backward"),
        "column-parallel input grad not all-reduced: the grad into the first column-parallel linear reached is partial"),
    Variant("row_bias_before_reduce", "slip", (
        ("        output = ReduceFromModelParallelRegion.apply(F.linear(x, self.weight), self.group)\n"
         "        return output if self.bias is None else output + self.bias\n",
         "        return ReduceFromModelParallelRegion.apply(F.linear(x, self.weight, self.bias), self.group)\n"),),
        "parallel", ("down_proj",), "row-parallel bias added on every rank before the all-reduce: counted twice"),
    Variant("fused_gate_up_split_whole", "slip", (("(\"mlp\", \"gate_up_proj\", \"column\", 2)", "(\"mlp\", \"gate_up_proj\", \"column\", 1)"),),
            "parallel", ("gate_up_proj",), "fused gate/up weight split as one: rank 0 gets all gates, rank 1 all ups"),
)

FAMILY = Family("tensor_parallel", "https://github.com/huggingface/picotron (Apache-2.0)", ORIGINAL, PORT, VARIANTS,
                stages=("S1", "S3"))
