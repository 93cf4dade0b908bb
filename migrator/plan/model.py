"""The model's shape: what the cost model needs (read from a config by `configs.py`, or from the program by `probe.py`)."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any


class ModelError(ValueError):
    """The model shape cannot be read (the message names the file and the key)."""


@dataclass(frozen=True)
class ModelShape:
    name: str
    layers: int
    hidden: int
    heads: int
    kv_heads: int
    ffn: int            # dense MLP hidden size (the dense layers of an MoE model; 0 when there are none)
    vocab: int
    experts: int = 0    # routed experts per MoE layer (0 = dense)
    top_k: int = 0
    expert_ffn: int = 0
    shared_experts: int = 0
    gated_mlp: bool = False  # SwiGLU-style: three matrices instead of two
    tied_embeddings: bool = True  # output head shares the input embedding (as in Narayanan et al.)
    source: str = ""
    head_dim_: int = 0       # per-head width when it is not hidden / heads (Qwen3, Gemma)
    dense_layers: int = 0    # MoE: the first k layers are dense MLPs of width ffn (DeepSeek first_k_dense_replace)
    shared_ffn: int = 0      # MoE: total width of the shared experts when it is not shared_experts x expert_ffn
    q_lora: int = 0          # MLA (DeepSeek-V2/V3): query down-projection rank (0: a plain Q projection)
    kv_lora: int = 0         # MLA: key/value latent rank (> 0 turns MLA on)
    rope_dim: int = 0        # MLA: decoupled RoPE key width per head
    nope_dim: int = 0        # MLA: per-head query/key width without RoPE
    v_dim: int = 0           # MLA: per-head value width
    positions: int = 0       # learned absolute position embeddings (GPT-2: n_positions)

    @property
    def head_dim(self) -> int:
        return self.head_dim_ or self.hidden // self.heads

    @property
    def moe(self) -> bool:
        return self.experts > 0

    @property
    def mla(self) -> bool:
        return self.kv_lora > 0

    @property
    def moe_layers(self) -> int:
        return self.layers - self.dense_layers if self.moe else 0

    def qk_dim(self) -> int:
        """Per head width of Q and K."""
        return self.nope_dim + self.rope_dim if self.mla else self.head_dim

    def value_dim(self) -> int:
        return self.v_dim if self.mla else self.head_dim

    def attention_params(self) -> int:
        h, a = self.hidden, self.heads
        if self.mla:
            q = h * self.q_lora + self.q_lora * a * self.qk_dim() if self.q_lora else h * a * self.qk_dim()
            kv = h * (self.kv_lora + self.rope_dim) + self.kv_lora * a * (self.nope_dim + self.v_dim)
            return q + kv + a * self.v_dim * h
        kv = 2 * self.kv_heads * self.head_dim * h
        return 2 * h * a * self.head_dim + kv  # Q, O + K, V

    def mlp_params(self, width: int) -> int:
        return (3 if self.gated_mlp else 2) * self.hidden * width

    def shared_width(self) -> int:
        return self.shared_ffn or self.shared_experts * (self.expert_ffn or self.ffn)

    def expert_params(self) -> int:
        """Per MoE layer, all routed experts together (+ the router)."""
        return self.experts * (self.mlp_params(self.expert_ffn) + self.hidden) if self.moe else 0

    def params(self) -> dict[str, int]:
        """Weight counts (biases and norms are < 0.1 % and left out, as in Narayanan et al.). "dense" is every
        weight that is not a routed expert."""
        embeddings = self.vocab * self.hidden * (1 if self.tied_embeddings else 2) + self.positions * self.hidden
        dense_mlp_layers = self.dense_layers if self.moe else self.layers
        dense = (self.layers * self.attention_params() + dense_mlp_layers * self.mlp_params(self.ffn)
                 + self.moe_layers * self.mlp_params(self.shared_width()) + embeddings)
        experts = self.moe_layers * self.expert_params()
        return {"dense": dense, "experts": experts, "total": dense + experts}

    def active_linear_params(self) -> int:
        """Per layer on average, the linear weights one token passes through (routed: top_k experts)."""
        if not self.moe:
            return self.attention_params() + self.mlp_params(self.ffn)
        moe_layer = self.mlp_params(self.shared_width()) + self.top_k * self.mlp_params(self.expert_ffn)
        mixed = (self.dense_layers * self.mlp_params(self.ffn) + self.moe_layers * moe_layer) / self.layers
        return self.attention_params() + round(mixed)

    def mlp_width_active(self) -> int:
        """MLP hidden width one token passes through on average (for the activation estimate)."""
        if not self.moe:
            return self.ffn
        moe_width = self.top_k * self.expert_ffn + self.shared_width()
        return round((self.dense_layers * self.ffn + self.moe_layers * moe_width) / self.layers)

    def to_json(self) -> dict[str, Any]:
        return asdict(self) | {"params": self.params()}

