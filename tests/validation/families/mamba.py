"""Family "mamba": a Mamba selective-scan language model, shrunk to 2 layers of d_model 16.

Source: johnma2006/mamba-minimal, ``model.py`` (https://github.com/johnma2006/mamba-minimal, Apache-2.0),
with the dt_proj / A_log / D initialisation and the ``_no_weight_decay`` marks of state-spaces/mamba
``mamba_ssm/modules/mamba_simple.py`` (https://github.com/state-spaces/mamba, Apache-2.0); einops
replaced by torch ops, weights not tied. Protocol additions: an EMA of the weights kept as buffers, AdamW
with parameter groups, a CUDA GradScaler. Hand port: ``npu_rms_norm`` and the gate ``y * silu(res)`` as
``npu_swiglu``."""

from __future__ import annotations

from .harness import Family, Variant

ORIGINAL = '''
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

D_MODEL, N_LAYER, VOCAB, D_STATE, EXPAND, D_CONV, SEQ, BATCH = 16, 2, 32, 4, 2, 4, 8, 2
D_INNER, DT_RANK = EXPAND * D_MODEL, math.ceil(D_MODEL / 16)
DT_SCALE, DT_MIN, DT_MAX = 0.5, 1e-3, 0.1
EMA_DECAY = 0.99


class RMSNorm(nn.Module):
    def __init__(self, d_model, eps=1e-5):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d_model))

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


class MambaBlock(nn.Module):
    def __init__(self, dt_scale=1.0, dt_init="random"):
        super().__init__()
        self.in_proj = nn.Linear(D_MODEL, D_INNER * 2, bias=False)
        self.conv1d = nn.Conv1d(D_INNER, D_INNER, kernel_size=D_CONV, groups=D_INNER, padding=D_CONV - 1)
        self.x_proj = nn.Linear(D_INNER, DT_RANK + D_STATE * 2, bias=False)
        self.dt_proj = nn.Linear(DT_RANK, D_INNER, bias=True)
        dt_init_std = DT_RANK ** -0.5 * dt_scale
        if dt_init == "constant":
            nn.init.constant_(self.dt_proj.weight, dt_init_std)
        else:
            nn.init.uniform_(self.dt_proj.weight, -dt_init_std, dt_init_std)
        dt = torch.exp(torch.rand(D_INNER) * (math.log(DT_MAX) - math.log(DT_MIN)) + math.log(DT_MIN))
        with torch.no_grad():
            self.dt_proj.bias.copy_(dt + torch.log(-torch.expm1(-dt)))  # inverse of softplus
        A = torch.arange(1, D_STATE + 1, dtype=torch.float32).repeat(D_INNER, 1)
        self.A_log = nn.Parameter(torch.log(A))
        self.A_log._no_weight_decay = True
        self.D = nn.Parameter(torch.ones(D_INNER))
        self.D._no_weight_decay = True
        self.out_proj = nn.Linear(D_INNER, D_MODEL, bias=False)

    def forward(self, x):
        (b, l, d) = x.shape
        x_and_res = self.in_proj(x).transpose(1, 2)  # (b, 2 * d_in, l)
        (x, res) = x_and_res.split(split_size=[D_INNER, D_INNER], dim=1)
        x = self.conv1d(x)[:, :, :l]
        x = F.silu(x)
        y = self.ssm(x)
        y = y * F.silu(res)
        return self.out_proj(y.transpose(1, 2))

    def ssm(self, x):
        (d_in, n) = self.A_log.shape
        A = -torch.exp(self.A_log.float())
        D = self.D.float()
        x_dbl = self.x_proj(x.transpose(1, 2))  # (b, l, dt_rank + 2 * n)
        (delta, B, C) = x_dbl.split(split_size=[DT_RANK, n, n], dim=-1)
        delta = F.softplus(self.dt_proj(delta))  # (b, l, d_in)
        return self.selective_scan(x, delta, A, B, C, D)

    def selective_scan(self, u, delta, A, B, C, D):
        (b, d_in, l) = u.shape
        n = A.shape[1]
        deltaA = torch.exp(torch.einsum("bld,dn->bdln", delta, A))
        deltaB_u = torch.einsum("bld,bln,bdl->bdln", delta, B, u)
        x = torch.zeros((b, d_in, n), device=u.device)
        ys = []
        for i in range(l):
            x = deltaA[:, :, i] * x + deltaB_u[:, :, i]
            ys.append(torch.einsum("bdn,bn->bd", x, C[:, i, :]))
        y = torch.stack(ys, dim=2)  # (b, d_in, l)
        return y + u * D[:, None]


class ResidualBlock(nn.Module):
    def __init__(self):
        super().__init__()
        self.mixer = MambaBlock(dt_scale=DT_SCALE, dt_init="constant")
        self.norm = RMSNorm(D_MODEL)

    def forward(self, x):
        return self.mixer(self.norm(x)) + x


class Mamba(nn.Module):
    def __init__(self):
        super().__init__()
        self.embedding = nn.Embedding(VOCAB, D_MODEL)
        self.layers = nn.ModuleList([ResidualBlock() for _ in range(N_LAYER)])
        self.norm_f = RMSNorm(D_MODEL)
        self.lm_head = nn.Linear(D_MODEL, VOCAB, bias=False)
        for name, p in self.named_parameters():  # EMA of the weights, saved with the model
            self.register_buffer("ema_" + name.replace(".", "_"), p.detach().clone())

    @torch.no_grad()
    def update_ema(self, decay):
        for name, p in self.named_parameters():
            getattr(self, "ema_" + name.replace(".", "_")).mul_(decay).add_(p.detach(), alpha=1 - decay)

    def forward(self, input_ids):
        x = self.embedding(input_ids)
        for layer in self.layers:
            x = layer(x)
        return self.lm_head(self.norm_f(x))


INPUT_KEYS = ("input_ids",)


def make_model(dropout=0.0):
    return Mamba()


def make_batch(step):
    g = torch.Generator().manual_seed(7 + step)
    ids = torch.randint(0, VOCAB, (BATCH, SEQ + 1), generator=g)
    return {"input_ids": ids[:, :-1], "targets": ids[:, 1:]}


def loss_fn(out, batch):
    return F.cross_entropy(out.float().flatten(0, 1), batch["targets"].flatten())


def make_optimizer(model):
    decay, no_decay = [], []
    for p in model.parameters():
        (no_decay if getattr(p, "_no_weight_decay", False) or p.dim() < 2 else decay).append(p)
    return torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": no_decay, "weight_decay": 0.0}],
                             lr=3e-3, betas=(0.9, 0.95))


def make_scaler():
    return torch.cuda.amp.GradScaler(init_scale=2.0**8)


def train_step(model, optimizer, loss, scaler):
    scaler.scale(loss).backward()
    scaler.unscale_(optimizer)
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    scaler.step(optimizer)
    scaler.update()
    optimizer.zero_grad(set_to_none=True)
    model.update_ema(EMA_DECAY)
'''

PORT = (
    ("import torch\n", "import torch\nimport torch_npu\n"),
    ("        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight\n",
     "        return torch_npu.npu_rms_norm(x, self.weight, epsilon=self.eps)[0]\n"),
    ("        y = y * F.silu(res)\n",
     "        y = torch_npu.npu_swiglu(torch.cat([res, y], dim=1), dim=1)  # silu(first half) * second half\n"),
    ("    return torch.cuda.amp.GradScaler(init_scale=2.0**8)", "    return torch.npu.amp.GradScaler(init_scale=2.0**8)"),
)

VARIANTS = (
    Variant("fix_port", "fix", what="migrate fix on the original"),
    Variant("hand_port", "hand", what="npu_rms_norm, npu_swiglu for the gate"),
    Variant("scan_broadcast", "refactor", (
        ('deltaA = torch.exp(torch.einsum("bld,dn->bdln", delta, A))',
         "deltaA = torch.exp(delta.transpose(1, 2)[..., None] * A[:, None, :])"),
        ('deltaB_u = torch.einsum("bld,bln,bdl->bdln", delta, B, u)',
         "deltaB_u = (delta * u.transpose(1, 2)).transpose(1, 2)[..., None] * B[:, None, :, :]"),
        ('ys.append(torch.einsum("bdn,bn->bd", x, C[:, i, :]))', "ys.append((x * C[:, i, None, :]).sum(-1))")),
        what="scan written with broadcasting instead of einsum"),
    Variant("conv_left_pad", "refactor", (
        ("        x = self.conv1d(x)[:, :, :l]\n",
         "        x = F.conv1d(F.pad(x, (D_CONV - 1, 0)), self.conv1d.weight, self.conv1d.bias, groups=D_INNER)\n"),),
        what="causal conv as a left pad and an unpadded conv instead of pad both sides and slice"),
    Variant("chunk_and_softplus", "refactor", (
        ("(x, res) = x_and_res.split(split_size=[D_INNER, D_INNER], dim=1)", "x, res = x_and_res.chunk(2, dim=1)"),
        ("delta = F.softplus(self.dt_proj(delta))", "delta = torch.log1p(torch.exp(self.dt_proj(delta)))")),
        what="in_proj halves by chunk, softplus written out"),
    Variant("ema_lerp_inplace", "refactor", (
        ('getattr(self, "ema_" + name.replace(".", "_")).mul_(decay).add_(p.detach(), alpha=1 - decay)',
         'getattr(self, "ema_" + name.replace(".", "_")).lerp_(p.detach(), 1 - decay)'),),
        what="EMA update as lerp_"),
    Variant("dt_scale_ignored", "slip", (
        ("        dt_init_std = DT_RANK ** -0.5 * dt_scale\n", "        dt_init_std = DT_RANK ** -0.5\n"),),
        "init", ("dt_proj", "weight"), "MambaBlock ignores its dt_scale argument: dt_proj.weight all 1, not 0.5"),
    Variant("ema_decay", "slip", (("EMA_DECAY = 0.99\n", "EMA_DECAY = 0.999\n"),),
            "buffers", ("ema_",), "EMA decay 0.999 instead of 0.99"),
    Variant("no_weight_decay_lost", "slip", (
        ('(no_decay if getattr(p, "_no_weight_decay", False) or p.dim() < 2 else decay)',
         "(no_decay if p.dim() < 2 else decay)"),),
        "optimizer", ("weight_decay", "A_log"), "A_log's _no_weight_decay mark ignored: weight decay on A_log"),
    Variant("conv_sees_next", "slip", (("        x = self.conv1d(x)[:, :, :l]\n", "        x = self.conv1d(x)[:, :, 1:l + 1]\n"),),
            "masks", ("layers.0.mixer",), "causal conv sliced one step late: each position sees the next token"),
    Variant("rms_eps_default", "slip", (("epsilon=self.eps)[0]", ")[0]"),),
            "fused", ("npu_rms_norm", "eps"), "npu_rms_norm without epsilon: its 1e-6 default, not 1e-5"),
    Variant("swiglu_halves_swapped", "slip", (("torch.cat([res, y], dim=1)", "torch.cat([y, res], dim=1)"),),
            "fused", ("layers.0.mixer", "npu_swiglu"), "npu_swiglu input in the wrong order: activates y, not res"),
)

FAMILY = Family("mamba", "https://github.com/johnma2006/mamba-minimal (Apache-2.0)", ORIGINAL, PORT, VARIANTS)
