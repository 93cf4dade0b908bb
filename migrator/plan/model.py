"""The model's shape: what the cost model needs, from a HF / Megatron config JSON or the program itself."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path
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
    ffn: int            # dense MLP hidden size (0 when every layer is MoE without a shared expert)
    vocab: int
    experts: int = 0    # routed experts per MoE layer (0 = dense)
    top_k: int = 0
    expert_ffn: int = 0
    shared_experts: int = 0
    gated_mlp: bool = False  # SwiGLU-style: three matrices instead of two
    tied_embeddings: bool = True  # output head shares the input embedding (as in Narayanan et al.)
    source: str = ""

    @property
    def head_dim(self) -> int:
        return self.hidden // self.heads

    @property
    def moe(self) -> bool:
        return self.experts > 0

    def attention_params(self) -> int:
        kv = 2 * self.kv_heads * self.head_dim * self.hidden
        return 2 * self.hidden * self.hidden + kv  # Q, O + K, V

    def mlp_params(self, width: int) -> int:
        return (3 if self.gated_mlp else 2) * self.hidden * width

    def dense_mlp_params(self) -> int:
        """Per layer: the dense MLP, or the shared experts of an MoE layer."""
        if self.moe:
            return self.shared_experts * self.mlp_params(self.expert_ffn or self.ffn)
        return self.mlp_params(self.ffn)

    def expert_params(self) -> int:
        """Per layer, all routed experts together."""
        return self.experts * self.mlp_params(self.expert_ffn) if self.moe else 0

    def params(self) -> dict[str, int]:
        """Parameter counts (weights only; biases and norms are < 0.1 % and left out, as in Narayanan et al.)."""
        embeddings = self.vocab * self.hidden * (1 if self.tied_embeddings else 2)
        dense = self.layers * (self.attention_params() + self.dense_mlp_params()) + embeddings
        experts = self.layers * self.expert_params()
        return {"dense": dense, "experts": experts, "total": dense + experts}

    def active_linear_params(self) -> int:
        """Per layer, the linear weights one token passes through (routed: top_k experts)."""
        routed = self.top_k * self.mlp_params(self.expert_ffn) if self.moe else 0
        return self.attention_params() + self.dense_mlp_params() + routed

    def mlp_width_active(self) -> int:
        """MLP hidden width one token passes through (for the activation estimate)."""
        if self.moe:
            return self.top_k * self.expert_ffn + self.shared_experts * (self.expert_ffn or self.ffn)
        return self.ffn

    def to_json(self) -> dict[str, Any]:
        return asdict(self) | {"params": self.params()}


# HF, Megatron and nanoGPT spellings of each field, first match wins
_KEYS = {
    "layers": ("num_hidden_layers", "num_layers", "n_layer", "n_layers"),
    "hidden": ("hidden_size", "n_embd", "d_model", "dim"),
    "heads": ("num_attention_heads", "n_head", "n_heads", "num_heads"),
    "kv_heads": ("num_key_value_heads", "num_query_groups", "n_kv_head", "n_kv_heads"),
    "ffn": ("intermediate_size", "ffn_hidden_size", "ffn_hidden", "n_inner", "ffn_dim"),
    "vocab": ("vocab_size", "padded_vocab_size", "n_vocab"),
    "experts": ("num_local_experts", "num_experts", "n_routed_experts", "n_experts", "moe_num_experts"),
    "top_k": ("num_experts_per_tok", "moe_router_topk", "top_k", "moe_top_k"),
    "expert_ffn": ("moe_intermediate_size", "moe_ffn_hidden_size", "expert_hidden"),
    "shared_experts": ("n_shared_experts", "num_shared_experts"),
}
_GATED = ("silu", "swiglu", "swish")


def _pick(doc: dict[str, Any], field: str) -> int | None:
    for key in _KEYS[field]:
        value = doc.get(key)
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    return None


def _key_of(doc: dict[str, Any], field: str) -> str | None:
    return next((k for k in _KEYS[field] if isinstance(doc.get(k), int) and not isinstance(doc.get(k), bool)), None)


def from_dict(doc: dict[str, Any], name: str, source: str) -> ModelShape:
    from migrator.plan.model_checks import check_numbers

    check_numbers({f: _pick(doc, f) for f in _KEYS}, source, {f: k for f in _KEYS if (k := _key_of(doc, f))})
    found = {f: _pick(doc, f) or 0 for f in _KEYS}
    required = ["layers", "hidden", "heads", "vocab"] + (["top_k"] if found["experts"] else [])
    missing = [f for f in required if not found[f]]
    if missing:
        raise ModelError(f"{source}: missing {', '.join(missing)} (looked for "
                         + "; ".join(f"{f}: {'/'.join(_KEYS[f])}" for f in missing) + ")")
    act = str(doc.get("hidden_act") or doc.get("activation") or "").lower()
    gated = bool(doc.get("swiglu")) or any(g in act for g in _GATED)
    experts = found["experts"]
    ffn = found["ffn"] or (0 if experts else 4 * found["hidden"])  # GPT's 4h when unstated (Narayanan et al.)
    return ModelShape(
        name=name, layers=found["layers"], hidden=found["hidden"], heads=found["heads"],
        kv_heads=found["kv_heads"] or found["heads"], ffn=ffn, vocab=found["vocab"], experts=experts,
        top_k=found["top_k"] if experts else 0,
        expert_ffn=(found["expert_ffn"] or ffn) if experts else 0,
        shared_experts=found["shared_experts"], gated_mlp=gated, source=source,
        tied_embeddings=not (doc.get("tie_word_embeddings") is False or doc.get("untie_embeddings_and_output_weights")))


def from_config(path: str | Path) -> ModelShape:
    path = Path(path)
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ModelError(f"{path}: cannot read the model config: {exc}") from None
    if not isinstance(doc, dict):
        raise ModelError(f"{path}: a model config must be a JSON object")
    return from_dict(doc, path.stem, str(path))
