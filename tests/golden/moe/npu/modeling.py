"""
MoE decoder: tensor-parallel attention + top-k routed experts spread over ranks (expert parallel).

Routing follows Switch/Mixtral: fp32 router, softmax, top-k, renormalised gates, and a
load-balancing loss E * sum_e(f_e * P_e). A DeepSeek-style shared expert runs on a side CUDA
stream so it overlaps with the all-to-all token dispatch.
"""

from dataclasses import dataclass

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F

from parallel import (ColumnParallelLinear, RowParallelLinear, all_to_all, group_rank, group_size,
                      nvtx_range)


@dataclass
class MoEConfig:
    vocab_size: int = 32000
    max_seq: int = 2048
    n_layer: int = 8
    n_head: int = 16
    n_embd: int = 1024
    n_experts: int = 8
    top_k: int = 2
    expert_hidden: int = 1408
    dropout: float = 0.0


MOE_CONFIGS = {
    "tiny": MoEConfig(vocab_size=64, max_seq=64, n_layer=2, n_head=4, n_embd=32, n_experts=4,
                      top_k=2, expert_hidden=64),
    "small": MoEConfig(),
}


class Attention(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.n_head, self.head_dim = cfg.n_head, cfg.n_embd // cfg.n_head
        self.wqkv = ColumnParallelLinear(cfg.n_embd, 3 * cfg.n_embd, parts=3)  # fused Q|K|V
        self.wo = RowParallelLinear(cfg.n_embd, cfg.n_embd)
        self.dropout = cfg.dropout

    def shard_(self, tp_group):
        tp = group_size(tp_group)
        assert self.n_head % tp == 0, "heads must divide evenly over TP ranks"
        self.n_head //= tp
        self.wqkv.shard_(tp_group)
        self.wo.shard_(tp_group)

    def forward(self, x):
        B, T, _ = x.shape
        q, k, v = self.wqkv(x).view(B, T, 3, self.n_head, self.head_dim).unbind(2)
        y = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2),
                                           is_causal=True, dropout_p=self.dropout if self.training else 0.0)
        return self.wo(y.transpose(1, 2).reshape(B, T, -1))


class Expert(nn.Module):
    def __init__(self, d, hidden):
        super().__init__()
        self.w1, self.w3 = nn.Linear(d, hidden, bias=False), nn.Linear(d, hidden, bias=False)
        self.w2 = nn.Linear(hidden, d, bias=False)

    def forward(self, x):
        return self.w2(F.silu(self.w1(x)) * self.w3(x))


class MoE(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.n_experts, self.top_k = cfg.n_experts, cfg.top_k
        self.router = nn.Linear(cfg.n_embd, cfg.n_experts, bias=False)
        self.experts = nn.ModuleList(Expert(cfg.n_embd, cfg.expert_hidden) for _ in range(cfg.n_experts))
        self.shared_expert = Expert(cfg.n_embd, cfg.expert_hidden)
        self.ep_group = None
        self._stream = None

    def shard_(self, ep_group):
        """Keep only this rank's contiguous slice of experts."""
        ep, r = group_size(ep_group), group_rank(ep_group)
        assert self.n_experts % ep == 0, "experts must divide evenly over EP ranks"
        n_local = self.n_experts // ep
        self.experts = nn.ModuleList(self.experts[r * n_local:(r + 1) * n_local])
        for p in self.experts.parameters():
            p.expert_parallel = True  # grads of these are not all-reduced over data parallel
        self.ep_group = ep_group

    def forward(self, x):
        B, T, D = x.shape
        tokens = x.reshape(-1, D)
        with nvtx_range("moe_router"):
            probs = self.router(tokens).float().softmax(dim=-1)  # route in fp32
            gates, experts = probs.topk(self.top_k, dim=-1)
            gates = gates / gates.sum(dim=-1, keepdim=True)
            frac = F.one_hot(experts, self.n_experts).float().sum((0, 1)) / experts.numel()
            aux_loss = self.n_experts * (frac * probs.mean(0)).sum()

        if tokens.is_npu:  # overlap the shared expert with dispatch/combine
            if self._stream is None:
                self._stream = torch.npu.Stream(device=tokens.device)
            self._stream.wait_stream(torch.npu.current_stream())
            with torch.npu.stream(self._stream):
                shared = self.shared_expert(tokens)
            shared_done = torch.npu.Event()
            shared_done.record(self._stream)
        else:
            shared = self.shared_expert(tokens)

        routed = self._dispatch_and_combine(tokens, experts, gates)
        if tokens.is_npu:
            torch.npu.current_stream().wait_event(shared_done)
            shared.record_stream(torch.npu.current_stream())
        return (routed + shared).view(B, T, D), aux_loss

    def _dispatch_and_combine(self, tokens, experts, gates):
        flat = experts.reshape(-1)  # (N*k,) global expert id of every assignment
        order = flat.argsort(stable=True)  # group assignments by expert (= by owning rank)
        src = order // self.top_k
        x = tokens[src]
        counts = torch.bincount(flat, minlength=self.n_experts)
        ep = group_size(self.ep_group)
        n_local = self.n_experts // ep
        with nvtx_range("moe_dispatch"):
            if ep > 1:
                recv = torch.empty_like(counts)  # recv[s*n_local + e] = tokens rank s sends to my expert e
                dist.all_to_all_single(recv, counts, group=self.ep_group)
                send_splits = counts.view(ep, n_local).sum(1).tolist()
                recv_splits = recv.view(ep, n_local).sum(1).tolist()
                x = all_to_all(x, recv_splits, send_splits, self.ep_group)
            else:
                recv = counts
        with nvtx_range("moe_experts"):
            y = self._run_local_experts(x, recv.view(ep, n_local))
        with nvtx_range("moe_combine"):
            if ep > 1:
                y = all_to_all(y, send_splits, recv_splits, self.ep_group)
        w = gates.reshape(-1)[order].unsqueeze(-1).to(y.dtype)
        return y.new_zeros(tokens.shape).index_add_(0, src, y * w)

    def _run_local_experts(self, x, recv):
        """x holds chunks ordered (source rank, local expert); run each expert on its rows."""
        sizes = recv.flatten().tolist()
        chunks = list(x.split(sizes))
        ep, n_local = recv.shape
        out = [None] * len(chunks)
        for e, expert in enumerate(self.experts):
            idx = [s * n_local + e for s in range(ep)]
            y = expert(torch.cat([chunks[i] for i in idx]))
            for i, piece in zip(idx, y.split([sizes[i] for i in idx])):
                out[i] = piece
        return torch.cat(out) if out else x


class Block(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.ln1, self.attn = nn.LayerNorm(cfg.n_embd), Attention(cfg)
        self.ln2, self.moe = nn.LayerNorm(cfg.n_embd), MoE(cfg)

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        h, aux = self.moe(self.ln2(x))
        return x + h, aux


class MoEGPT(nn.Module):
    def __init__(self, cfg: MoEConfig):
        super().__init__()
        self.cfg = cfg
        self.wte = nn.Embedding(cfg.vocab_size, cfg.n_embd)
        self.wpe = nn.Embedding(cfg.max_seq, cfg.n_embd)
        self.blocks = nn.ModuleList(Block(cfg) for _ in range(cfg.n_layer))
        self.ln_f = nn.LayerNorm(cfg.n_embd)
        self.lm_head = nn.Linear(cfg.n_embd, cfg.vocab_size, bias=False)

    def parallelize_(self, tp_group=None, ep_group=None):
        """Shard in place. Build the full model with the same seed on every rank first, so the
        shards are slices of one consistent set of weights."""
        for blk in self.blocks:
            if tp_group is not None:
                blk.attn.shard_(tp_group)
            if ep_group is not None:
                blk.moe.shard_(ep_group)
        return self

    def forward(self, idx):
        """idx (B, T) -> (logits (B, T, V), mean load-balancing loss over layers)."""
        T = idx.shape[1]
        x = self.wte(idx) + self.wpe(torch.arange(T, device=idx.device))
        aux = 0.0
        for blk in self.blocks:
            x, a = blk(x)
            aux = aux + a
        return self.lm_head(self.ln_f(x)), aux / len(self.blocks)
