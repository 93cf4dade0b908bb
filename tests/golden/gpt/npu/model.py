"""
Decoder-only GPT (nanoGPT lineage) with the usual Megatron-era speedups:
  * FlashAttention-2 for causal attention, plus the varlen kernel for packed documents
  * Apex fused RMSNorm / LayerNorm
  * rotary position embeddings (rotate_half convention), SwiGLU MLP, grouped-query attention
  * optional learned "memory" tokens prepended to K/V only (queries stay at length T)
"""

import math
from dataclasses import dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F
import torch_npu


class _MigrateRMSNorm(torch.nn.Module):
    """apex FusedRMSNorm on Ascend through torch_npu.npu_rms_norm. Added by ascend-migrate.

    Same parameter name (`weight`) and defaults as apex (eps=1e-5, elementwise_affine=True);
    npu_rms_norm needs a weight, so a non-affine norm uses a constant buffer of ones.
    """

    def __init__(self, normalized_shape, eps=1e-5, elementwise_affine=True):
        super().__init__()
        if isinstance(normalized_shape, int):
            normalized_shape = (normalized_shape,)
        self.normalized_shape = tuple(normalized_shape)
        self.eps = eps
        self.elementwise_affine = elementwise_affine
        if elementwise_affine:
            self.weight = torch.nn.Parameter(torch.ones(self.normalized_shape))
        else:
            self.register_buffer("weight", torch.ones(self.normalized_shape), persistent=False)

    def forward(self, x):
        if torch.is_autocast_enabled(x.device.type):  # like apex: normalise in the autocast dtype
            x = x.to(torch.get_autocast_dtype(x.device.type))
        return torch_npu.npu_rms_norm(x, self.weight.to(x.dtype), epsilon=self.eps)[0]


def _migrate_flash_attn(q, k, v, dropout_p=0.0, softmax_scale=None, causal=False, causal_align="bottom_right"):
    """flash_attn_func on Ascend through torch_npu.npu_fusion_attention. Added by ascend-migrate.

    (batch, seqlen, heads, head_dim) is layout "BSND"; GQA/MQA work through head_num = query heads.
    npu_fusion_attention's scale defaults to 1.0, so flash-attn's 1/sqrt(head_dim) is passed explicitly.
    Its mask marks True = masked out; causal masking uses the 2048x2048 compressed upper-triangular
    mask with sparse_mode 3 (bottom-right aligned, as flash-attn >= 2.1) or 2 (top-left).
    """
    scale = softmax_scale if softmax_scale is not None else q.shape[-1] ** -0.5
    mask = None
    sparse_mode = 0
    if causal:
        mask = torch.triu(torch.ones(2048, 2048, dtype=torch.bool, device=q.device), diagonal=1)
        sparse_mode = 3 if causal_align == "bottom_right" else 2
    return torch_npu.npu_fusion_attention(
        q, k, v, q.shape[2], "BSND",
        atten_mask=mask, scale=scale, keep_prob=1.0 - dropout_p, sparse_mode=sparse_mode,
    )[0]


def _migrate_flash_attn_varlen(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q=None, max_seqlen_k=None,
                               dropout_p=0.0, softmax_scale=None, causal=False):
    """flash_attn_varlen_func on Ascend through npu_fusion_attention, layout "TND". Added by ascend-migrate.

    actual_seq_qlen/kvlen are host int lists of cumulative lengths WITHOUT flash-attn's leading 0
    (a device-to-host copy); max_seqlen_* are not needed. Scale and causal mask as in _migrate_flash_attn.
    """
    scale = softmax_scale if softmax_scale is not None else q.shape[-1] ** -0.5
    mask = None
    if causal:
        mask = torch.triu(torch.ones(2048, 2048, dtype=torch.bool, device=q.device), diagonal=1)
    return torch_npu.npu_fusion_attention(
        q, k, v, q.shape[1], "TND",
        atten_mask=mask, scale=scale, keep_prob=1.0 - dropout_p,
        actual_seq_qlen=cu_seqlens_q[1:].tolist(), actual_seq_kvlen=cu_seqlens_k[1:].tolist(),
        sparse_mode=3 if causal else 0,
    )[0]


@dataclass
class GPTConfig:
    block_size: int = 2048
    vocab_size: int = 32000
    n_layer: int = 12
    n_head: int = 12
    n_kv_head: int = 4  # GQA: every 3 query heads share one K/V head
    n_embd: int = 768
    n_memory: int = 16  # learned memory slots attended by every query (0 disables)
    ffn_hidden: int = 2048
    dropout: float = 0.0
    rope_theta: float = 10000.0
    norm_eps: float = 1e-5


GPT_CONFIGS = {
    # smoke-test size: runs in seconds, still has GQA (4q/2kv heads) and memory slots
    "tiny": GPTConfig(block_size=64, vocab_size=64, n_layer=2, n_head=4, n_kv_head=2, n_embd=64,
                      n_memory=4, ffn_hidden=128),
    "125m": GPTConfig(n_layer=12, n_head=12, n_kv_head=4, n_embd=768, ffn_hidden=2048),
    "350m": GPTConfig(n_layer=24, n_head=16, n_kv_head=4, n_embd=1024, ffn_hidden=2816),
}


def rotate_half(x):
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)


def apply_rotary(x, cos, sin):
    # x: (B, T, H, D); cos/sin: (T, D) or (B, T, D) for per-document positions.
    # Cast the tables to x's dtype, otherwise fp32 tables upcast half q/k and flash-attn rejects them.
    if cos.dim() == 2:
        cos, sin = cos.unsqueeze(0), sin.unsqueeze(0)
    cos, sin = cos.unsqueeze(2).to(x.dtype), sin.unsqueeze(2).to(x.dtype)
    return x * cos + rotate_half(x) * sin


class Rotary(nn.Module):
    def __init__(self, head_dim, max_seq, theta):
        super().__init__()
        inv_freq = 1.0 / (theta ** (torch.arange(0, head_dim, 2).float() / head_dim))
        t = torch.arange(max_seq).float()
        freqs = torch.outer(t, inv_freq)
        emb = torch.cat((freqs, freqs), dim=-1)
        self.register_buffer("cos", emb.cos(), persistent=False)
        self.register_buffer("sin", emb.sin(), persistent=False)

    def forward(self, positions):
        return self.cos[positions], self.sin[positions]


class Attention(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.n_head, self.n_kv_head = cfg.n_head, cfg.n_kv_head
        self.head_dim = cfg.n_embd // cfg.n_head
        self.n_memory = cfg.n_memory
        self.wqkv = nn.Linear(cfg.n_embd, (cfg.n_head + 2 * cfg.n_kv_head) * self.head_dim, bias=False)
        self.wo = nn.Linear(cfg.n_head * self.head_dim, cfg.n_embd, bias=False)
        self.dropout = cfg.dropout
        if self.n_memory:
            # Memory slots have no position (no RoPE): they behave like a learned prefix cache.
            self.mem_k = nn.Parameter(torch.randn(self.n_memory, self.n_kv_head, self.head_dim) * 0.02)
            self.mem_v = nn.Parameter(torch.randn(self.n_memory, self.n_kv_head, self.head_dim) * 0.02)

    def _with_memory_packed(self, k, v, cu_seqlens):
        # Insert the memory slots in front of every packed document: K/V get P extra rows per doc.
        mk, mv = self.mem_k.to(k.dtype), self.mem_v.to(v.dtype)
        bounds = cu_seqlens.tolist()
        ks, vs = [], []
        for s, e in zip(bounds[:-1], bounds[1:]):
            ks += [mk, k[s:e]]
            vs += [mv, v[s:e]]
        n_docs = cu_seqlens.numel() - 1
        cu_k = cu_seqlens + self.n_memory * torch.arange(n_docs + 1, device=cu_seqlens.device, dtype=cu_seqlens.dtype)
        return torch.cat(ks), torch.cat(vs), cu_k

    def forward(self, x, cos, sin, cu_seqlens=None, max_seqlen=None):
        B, T, _ = x.shape
        hq, hkv, hd = self.n_head, self.n_kv_head, self.head_dim
        q, k, v = self.wqkv(x).split([hq * hd, hkv * hd, hkv * hd], dim=-1)
        q, k, v = q.view(B, T, hq, hd), k.view(B, T, hkv, hd), v.view(B, T, hkv, hd)
        q, k = apply_rotary(q, cos, sin), apply_rotary(k, cos, sin)
        dropout_p = self.dropout if self.training else 0.0

        if cu_seqlens is not None:
            # Packed documents: (B*T, H, D) rows, attention never crosses a document boundary.
            q, k, v = q.reshape(B * T, hq, hd), k.reshape(B * T, hkv, hd), v.reshape(B * T, hkv, hd)
            cu_k, max_k = cu_seqlens, max_seqlen
            if self.n_memory:
                k, v, cu_k = self._with_memory_packed(k, v, cu_seqlens)
                max_k = max_seqlen + self.n_memory
            y = _migrate_flash_attn_varlen(q, k, v, cu_seqlens, cu_k, max_seqlen, max_k,
                                       dropout_p=dropout_p, causal=True)
        else:
            if self.n_memory:
                mk = self.mem_k.to(k.dtype).unsqueeze(0).expand(B, -1, -1, -1)
                mv = self.mem_v.to(v.dtype).unsqueeze(0).expand(B, -1, -1, -1)
                k, v = torch.cat([mk, k], dim=1), torch.cat([mv, v], dim=1)
            # K/V are P longer than Q here. flash-attn >= 2.1 aligns the causal mask bottom-right,
            # so query t sees all P memory slots and tokens 0..t.
            y = _migrate_flash_attn(q, k, v, dropout_p=dropout_p, causal=True)
        return self.wo(y.reshape(B, T, hq * hd))


class SwiGLU(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.w_gate = nn.Linear(cfg.n_embd, cfg.ffn_hidden, bias=False)
        self.w_up = nn.Linear(cfg.n_embd, cfg.ffn_hidden, bias=False)
        self.w_down = nn.Linear(cfg.ffn_hidden, cfg.n_embd, bias=False)
        self.drop = nn.Dropout(cfg.dropout)

    def forward(self, x):
        return self.drop(self.w_down(F.silu(self.w_gate(x)) * self.w_up(x)))


class Block(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.attn_norm = _MigrateRMSNorm(cfg.n_embd, eps=cfg.norm_eps, elementwise_affine=True)
        self.attn = Attention(cfg)
        self.mlp_norm = _MigrateRMSNorm(cfg.n_embd, eps=cfg.norm_eps, elementwise_affine=True)
        self.mlp = SwiGLU(cfg)

    def forward(self, x, cos, sin, cu_seqlens=None, max_seqlen=None):
        x = x + self.attn(self.attn_norm(x), cos, sin, cu_seqlens, max_seqlen)
        return x + self.mlp(self.mlp_norm(x))


class GPT(nn.Module):
    def __init__(self, cfg: GPTConfig):
        super().__init__()
        self.cfg = cfg
        self.wte = nn.Embedding(cfg.vocab_size, cfg.n_embd)
        self.drop = nn.Dropout(cfg.dropout)
        self.rotary = Rotary(cfg.n_embd // cfg.n_head, cfg.block_size, cfg.rope_theta)
        self.blocks = nn.ModuleList([Block(cfg) for _ in range(cfg.n_layer)])
        # Final norm kept as LayerNorm so old GPT-2 style checkpoints still load.
        self.ln_f = nn.LayerNorm(cfg.n_embd, eps=cfg.norm_eps, elementwise_affine=True)
        self.lm_head = nn.Linear(cfg.n_embd, cfg.vocab_size, bias=False)
        self.wte.weight = self.lm_head.weight  # weight tying
        self.apply(self._init_weights)
        for name, p in self.named_parameters():  # GPT-2 scaled init of residual projections
            if name.endswith(("wo.weight", "w_down.weight")):
                nn.init.normal_(p, mean=0.0, std=0.02 / math.sqrt(2 * cfg.n_layer))

    @staticmethod
    def _init_weights(m):
        if isinstance(m, (nn.Linear, nn.Embedding)):
            nn.init.normal_(m.weight, mean=0.0, std=0.02)

    def forward(self, idx, targets=None, positions=None, cu_seqlens=None, max_seqlen=None):
        """idx (B, T). ``cu_seqlens`` (int32, n_docs+1) switches to document-masked attention;
        ``positions`` then restart at 0 in every document. Returns (logits, loss|None)."""
        B, T = idx.shape
        if positions is None:
            positions = torch.arange(T, device=idx.device)
        if cu_seqlens is not None and max_seqlen is None:
            max_seqlen = int(cu_seqlens.diff().max())
        cos, sin = self.rotary(positions)
        x = self.drop(self.wte(idx))
        for block in self.blocks:
            x = block(x, cos, sin, cu_seqlens, max_seqlen)
        logits = self.lm_head(self.ln_f(x))
        loss = None
        if targets is not None:
            loss = F.cross_entropy(logits.float().view(-1, logits.size(-1)), targets.view(-1))
        return logits, loss
