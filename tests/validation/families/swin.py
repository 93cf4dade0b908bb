"""Family "swin": a Swin Transformer stage (windowed attention with a relative position bias table and
its index buffer, a regular and a shifted-window block with the shifted windows' -100 mask), shrunk to
8x8 images, 2x2 patches, windows of 2, 2 heads.

Source: microsoft/Swin-Transformer, ``models/swin_transformer.py`` and ``optimizer.py``'s weight-decay
groups (https://github.com/microsoft/Swin-Transformer, MIT); patch merging and drop-path left out, timm's
``trunc_normal_`` replaced by torch's. Hand port: the window attention as ``npu_fusion_attention`` with
the bias as ``pse`` (added before the kernel's scale, so divided by it) and the shift mask as a bool
``atten_mask`` (True = masked out)."""

from __future__ import annotations

from .harness import Family, Variant

ORIGINAL = '''
import torch
import torch.nn as nn
import torch.nn.functional as F

IMG, PATCH, DIM, HEADS, WINDOW, MLP_RATIO, CLASSES, BATCH = 8, 2, 16, 2, 2, 2, 5, 2
INIT_STD = 0.05


def window_partition(x, window_size):
    B, H, W, C = x.shape
    x = x.view(B, H // window_size, window_size, W // window_size, window_size, C)
    return x.permute(0, 1, 3, 2, 4, 5).contiguous().view(-1, window_size, window_size, C)


def window_reverse(windows, window_size, H, W):
    B = int(windows.shape[0] / (H * W / window_size / window_size))
    x = windows.view(B, H // window_size, W // window_size, window_size, window_size, -1)
    return x.permute(0, 1, 3, 2, 4, 5).contiguous().view(B, H, W, -1)


class WindowAttention(nn.Module):
    def __init__(self, dim, window_size, num_heads, qkv_bias=True, qk_scale=None):
        super().__init__()
        self.dim, self.window_size, self.num_heads = dim, window_size, num_heads
        head_dim = dim // num_heads
        self.scale = qk_scale or head_dim ** -0.5
        self.relative_position_bias_table = nn.Parameter(torch.zeros((2 * window_size - 1) ** 2, num_heads))
        coords = torch.stack(torch.meshgrid([torch.arange(window_size), torch.arange(window_size)], indexing="ij"))
        coords_flatten = torch.flatten(coords, 1)  # 2, Wh*Ww
        relative_coords = coords_flatten[:, :, None] - coords_flatten[:, None, :]
        relative_coords = relative_coords.permute(1, 2, 0).contiguous()
        relative_coords[:, :, 0] += window_size - 1
        relative_coords[:, :, 1] += window_size - 1
        relative_coords[:, :, 0] *= 2 * window_size - 1
        self.register_buffer("relative_position_index", relative_coords.sum(-1))
        self.qkv = nn.Linear(dim, dim * 3, bias=qkv_bias)
        self.proj = nn.Linear(dim, dim)
        nn.init.trunc_normal_(self.relative_position_bias_table, std=.02)
        self.softmax = nn.Softmax(dim=-1)

    def forward(self, x, mask=None):
        B_, N, C = x.shape
        qkv = self.qkv(x).reshape(B_, N, 3, self.num_heads, C // self.num_heads).permute(2, 0, 3, 1, 4)
        q, k, v = qkv[0], qkv[1], qkv[2]
        q = q * self.scale
        attn = q @ k.transpose(-2, -1)
        relative_position_bias = self.relative_position_bias_table[self.relative_position_index.view(-1)].view(N, N, -1)
        relative_position_bias = relative_position_bias.permute(2, 0, 1).contiguous()
        attn = attn + relative_position_bias.unsqueeze(0)
        if mask is not None:
            nW = mask.shape[0]
            attn = attn.view(B_ // nW, nW, self.num_heads, N, N) + mask.unsqueeze(1).unsqueeze(0)
            attn = attn.view(-1, self.num_heads, N, N)
        attn = self.softmax(attn)
        x = (attn @ v).transpose(1, 2).reshape(B_, N, C)
        return self.proj(x)


class Mlp(nn.Module):
    def __init__(self, dim, hidden):
        super().__init__()
        self.fc1, self.act, self.fc2 = nn.Linear(dim, hidden), nn.GELU(), nn.Linear(hidden, dim)

    def forward(self, x):
        return self.fc2(self.act(self.fc1(x)))


class SwinTransformerBlock(nn.Module):
    def __init__(self, dim, input_resolution, num_heads, window_size, shift_size):
        super().__init__()
        self.input_resolution, self.window_size, self.shift_size = input_resolution, window_size, shift_size
        self.norm1 = nn.LayerNorm(dim)
        self.attn = WindowAttention(dim, window_size, num_heads)
        self.norm2 = nn.LayerNorm(dim)
        self.mlp = Mlp(dim, dim * MLP_RATIO)
        if self.shift_size > 0:
            H, W = self.input_resolution
            img_mask = torch.zeros((1, H, W, 1))
            slices = (slice(0, -window_size), slice(-window_size, -shift_size), slice(-shift_size, None))
            cnt = 0
            for h in slices:
                for w in slices:
                    img_mask[:, h, w, :] = cnt
                    cnt += 1
            mask_windows = window_partition(img_mask, window_size).view(-1, window_size * window_size)
            attn_mask = mask_windows.unsqueeze(1) - mask_windows.unsqueeze(2)
            attn_mask = attn_mask.masked_fill(attn_mask != 0, float(-100.0)).masked_fill(attn_mask == 0, float(0.0))
        else:
            attn_mask = None
        self.register_buffer("attn_mask", attn_mask)

    def forward(self, x):
        H, W = self.input_resolution
        B, L, C = x.shape
        shortcut = x
        x = self.norm1(x).view(B, H, W, C)
        if self.shift_size > 0:
            shifted_x = torch.roll(x, shifts=(-self.shift_size, -self.shift_size), dims=(1, 2))
        else:
            shifted_x = x
        x_windows = window_partition(shifted_x, self.window_size).view(-1, self.window_size * self.window_size, C)
        attn_windows = self.attn(x_windows, mask=self.attn_mask).view(-1, self.window_size, self.window_size, C)
        shifted_x = window_reverse(attn_windows, self.window_size, H, W)
        if self.shift_size > 0:
            x = torch.roll(shifted_x, shifts=(self.shift_size, self.shift_size), dims=(1, 2))
        else:
            x = shifted_x
        x = shortcut + x.view(B, H * W, C)
        return x + self.mlp(self.norm2(x))


class SwinTransformer(nn.Module):
    def __init__(self, init_std=0.02):
        super().__init__()
        self.init_std = init_std
        res = IMG // PATCH
        self.patch_embed = nn.Conv2d(3, DIM, kernel_size=PATCH, stride=PATCH)
        self.patch_norm = nn.LayerNorm(DIM)
        self.blocks = nn.ModuleList([SwinTransformerBlock(DIM, (res, res), HEADS, WINDOW, 0 if i % 2 == 0 else WINDOW // 2)
                                     for i in range(2)])
        self.norm = nn.LayerNorm(DIM)
        self.head = nn.Linear(DIM, CLASSES)
        self.apply(self._init_weights)

    def _init_weights(self, m):
        if isinstance(m, nn.Linear):
            nn.init.trunc_normal_(m.weight, std=self.init_std)
            if m.bias is not None:
                nn.init.constant_(m.bias, 0)
        elif isinstance(m, nn.LayerNorm):
            nn.init.constant_(m.bias, 0)
            nn.init.constant_(m.weight, 1.0)

    def no_weight_decay_keywords(self):
        return {"relative_position_bias_table"}

    def forward(self, x):
        x = self.patch_norm(self.patch_embed(x).flatten(2).transpose(1, 2))
        for blk in self.blocks:
            x = blk(x)
        return self.head(self.norm(x).mean(1))


INPUT_KEYS = ("x",)


def make_model(dropout=0.0):
    return SwinTransformer(init_std=INIT_STD)


def make_batch(step):
    g = torch.Generator().manual_seed(31 + step)
    return {"x": torch.randn(BATCH, 3, IMG, IMG, generator=g), "targets": torch.randint(0, CLASSES, (BATCH,), generator=g)}


def loss_fn(out, batch):
    return F.cross_entropy(out.float(), batch["targets"], label_smoothing=0.1)


def make_optimizer(model):
    skip_keywords = model.no_weight_decay_keywords()
    has_decay, no_decay = [], []
    for name, param in model.named_parameters():
        if len(param.shape) == 1 or name.endswith(".bias") or any(k in name for k in skip_keywords):
            no_decay.append(param)
        else:
            has_decay.append(param)
    return torch.optim.AdamW([{"params": has_decay}, {"params": no_decay, "weight_decay": 0.}],
                             lr=1e-3, eps=1e-8, betas=(0.9, 0.999), weight_decay=0.05)


def make_scaler():
    return torch.cuda.amp.GradScaler(init_scale=2.0**10)


def train_step(model, optimizer, loss, scaler):
    scaler.scale(loss).backward()
    scaler.unscale_(optimizer)
    torch.nn.utils.clip_grad_norm_(model.parameters(), 5.0)
    scaler.step(optimizer)
    scaler.update()
    optimizer.zero_grad(set_to_none=True)
'''

_EAGER_ATTENTION = '''        q = q * self.scale
        attn = q @ k.transpose(-2, -1)
        relative_position_bias = self.relative_position_bias_table[self.relative_position_index.view(-1)].view(N, N, -1)
        relative_position_bias = relative_position_bias.permute(2, 0, 1).contiguous()
        attn = attn + relative_position_bias.unsqueeze(0)
        if mask is not None:
            nW = mask.shape[0]
            attn = attn.view(B_ // nW, nW, self.num_heads, N, N) + mask.unsqueeze(1).unsqueeze(0)
            attn = attn.view(-1, self.num_heads, N, N)
        attn = self.softmax(attn)
        x = (attn @ v).transpose(1, 2).reshape(B_, N, C)
'''

_FUSED_ATTENTION = '''        relative_position_bias = self.relative_position_bias_table[self.relative_position_index.view(-1)].view(N, N, -1)
        relative_position_bias = relative_position_bias.permute(2, 0, 1).contiguous()
        atten_mask = None
        if mask is not None:  # (nW, N, N) additive -> (B_, 1, N, N) bool, True = masked out
            atten_mask = (mask != 0).repeat(B_ // mask.shape[0], 1, 1).unsqueeze(1)
        x = torch_npu.npu_fusion_attention(q, k, v, self.num_heads, "BNSD", atten_mask=atten_mask,
                                           pse=(relative_position_bias / self.scale).unsqueeze(0),  # scale·(pse + QKᵀ)
                                           scale=self.scale)[0]
        x = x.transpose(1, 2).reshape(B_, N, C)
'''

PORT = (
    ("import torch\n", "import torch\nimport torch_npu\n"),
    (_EAGER_ATTENTION, _FUSED_ATTENTION),
    ("    return torch.cuda.amp.GradScaler(init_scale=2.0**10)", "    return torch.npu.amp.GradScaler(init_scale=2.0**10)"),
)

VARIANTS = (
    Variant("fix_port", "fix", what="migrate fix on the original"),
    Variant("hand_port", "hand", what="window attention as npu_fusion_attention with pse and a bool shift mask"),
    Variant("qkv_from_slices", "refactor", (
        ("        qkv = self.qkv(x).reshape(B_, N, 3, self.num_heads, C // self.num_heads).permute(2, 0, 3, 1, 4)\n"
         "        q, k, v = qkv[0], qkv[1], qkv[2]\n",
         "        wq, wk, wv = self.qkv.weight.chunk(3, 0)\n"
         "        bq, bk, bv = self.qkv.bias.chunk(3, 0)\n"
         "        q, k, v = (F.linear(x, w, b).view(B_, N, self.num_heads, C // self.num_heads).transpose(1, 2)\n"
         "                   for w, b in ((wq, bq), (wk, bk), (wv, bv)))\n"),),
        what="q, k, v as three linears over the fused weight's slices"),
    Variant("roll_as_cat", "refactor", (
        ("            shifted_x = torch.roll(x, shifts=(-self.shift_size, -self.shift_size), dims=(1, 2))\n",
         "            s = self.shift_size\n"
         "            shifted_x = torch.cat([x[:, s:], x[:, :s]], 1)\n"
         "            shifted_x = torch.cat([shifted_x[:, :, s:], shifted_x[:, :, :s]], 2)\n"),
        ("            x = torch.roll(shifted_x, shifts=(self.shift_size, self.shift_size), dims=(1, 2))\n",
         "            x = torch.cat([shifted_x[:, -s:], shifted_x[:, :-s]], 1)\n"
         "            x = torch.cat([x[:, :, -s:], x[:, :, :-s]], 2)\n")),
        what="cyclic shift written as concatenated slices"),
    Variant("bias_index_select", "refactor", (
        ("self.relative_position_bias_table[self.relative_position_index.view(-1)].view(N, N, -1)",
         "self.relative_position_bias_table.index_select(0, self.relative_position_index.flatten()).view(N, N, -1)"),),
        what="relative bias gathered with index_select"),
    Variant("partition_unflatten", "refactor", (
        ("    x = x.view(B, H // window_size, window_size, W // window_size, window_size, C)\n"
         "    return x.permute(0, 1, 3, 2, 4, 5).contiguous().view(-1, window_size, window_size, C)\n",
         "    x = x.unflatten(2, (W // window_size, window_size)).unflatten(1, (H // window_size, window_size))\n"
         "    return x.transpose(2, 3).flatten(0, 2)\n"),),
        what="window_partition by unflatten/transpose/flatten"),
    Variant("init_std_ignored", "slip", (("nn.init.trunc_normal_(m.weight, std=self.init_std)", "nn.init.trunc_normal_(m.weight, std=.02)"),),
            "init", ("weight",), "_init_weights ignores init_std (0.05): std 0.02"),
    Variant("relative_index_stride", "slip", (("relative_coords[:, :, 0] *= 2 * window_size - 1", "relative_coords[:, :, 0] *= window_size"),),
            "buffers", ("relative_position_index",), "relative position index built with row stride 2 instead of 3: offsets collide"),
    Variant("bias_table_decayed", "slip", (('return {"relative_position_bias_table"}', "return set()"),),
            "optimizer", ("weight_decay", "relative_position_bias_table"), "weight decay on the relative position bias tables"),
    Variant("roll_back_wrong_way", "slip", (
        ("x = torch.roll(shifted_x, shifts=(self.shift_size, self.shift_size), dims=(1, 2))",
         "x = torch.roll(shifted_x, shifts=(-self.shift_size, -self.shift_size), dims=(1, 2))"),),
        "masks", ("blocks.1",), "shifted windows rolled back the same way as forward: tokens land one place off"),
    Variant("shift_mask_inverted", "slip", (("atten_mask = (mask != 0)", "atten_mask = (mask == 0)"),),
            "fused", ("blocks.1.attn", "mask"), "shift mask passed as a keep-mask (True = attend) to atten_mask"),
    Variant("pse_not_unscaled", "slip", (("pse=(relative_position_bias / self.scale).unsqueeze(0)", "pse=relative_position_bias.unsqueeze(0)"),),
            "fused", ("blocks.0.attn", "npu_fusion_attention"), "relative bias passed as pse without dividing by scale: scaled by 1/sqrt(8)"),
)

FAMILY = Family("swin", "https://github.com/microsoft/Swin-Transformer (MIT)", ORIGINAL, PORT, VARIANTS)
