"""Model shapes from a HF config JSON (with its config class's defaults) or Megatron arguments.

A HF config saved by `save_pretrained` omits keys equal to the class default (Llama's `hidden_act`,
Mistral's `num_key_value_heads`), so a key the file lacks is read from the config class: from
`transformers` when it is installed, else from `HF_DEFAULTS` below (copied from the transformers 4.x
`configuration_*.py` files named there). `model_type` also says which architectures have a gated MLP
(gate/up/down projections whatever the activation).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from .model import ModelError, ModelShape
from .model_checks import check_numbers

_SWIGLU = {"hidden_act": "silu", "tie_word_embeddings": False}
_DEEPSEEK_MLA = {"q_lora_rank": 1536, "kv_lora_rank": 512, "qk_rope_head_dim": 64, "v_head_dim": 128,
                 "qk_nope_head_dim": 128}
# model_type -> the config class's defaults (transformers/models/<type>/configuration_<type>.py)
HF_DEFAULTS: dict[str, dict[str, Any]] = {
    "llama": {**_SWIGLU, "vocab_size": 32000, "hidden_size": 4096, "intermediate_size": 11008,
              "num_hidden_layers": 32, "num_attention_heads": 32},
    "mistral": {**_SWIGLU, "vocab_size": 32000, "hidden_size": 4096, "intermediate_size": 14336,
                "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8},
    "mixtral": {**_SWIGLU, "vocab_size": 32000, "hidden_size": 4096, "intermediate_size": 14336,
                "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8,
                "num_local_experts": 8, "num_experts_per_tok": 2},
    "qwen2": {**_SWIGLU, "vocab_size": 151936, "hidden_size": 4096, "intermediate_size": 22016,
              "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 32},
    "qwen3": {**_SWIGLU, "vocab_size": 151936, "hidden_size": 4096, "intermediate_size": 22016,
              "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 32, "head_dim": 128},
    "qwen2_moe": {**_SWIGLU, "vocab_size": 151936, "hidden_size": 2048, "intermediate_size": 5632,
                  "num_hidden_layers": 24, "num_attention_heads": 16, "num_key_value_heads": 16,
                  "num_experts": 60, "num_experts_per_tok": 4, "moe_intermediate_size": 1408,
                  "shared_expert_intermediate_size": 5632},
    "qwen3_moe": {**_SWIGLU, "vocab_size": 151936, "hidden_size": 2048, "intermediate_size": 6144,
                  "num_hidden_layers": 24, "num_attention_heads": 32, "num_key_value_heads": 4, "head_dim": 128,
                  "num_experts": 128, "num_experts_per_tok": 8, "moe_intermediate_size": 768},
    "deepseek_v2": {**_SWIGLU, **_DEEPSEEK_MLA, "vocab_size": 102400, "hidden_size": 4096,
                    "intermediate_size": 11008, "moe_intermediate_size": 1407, "num_hidden_layers": 30,
                    "num_attention_heads": 32, "num_key_value_heads": 32, "first_k_dense_replace": 0},
    "deepseek_v3": {**_SWIGLU, **_DEEPSEEK_MLA, "vocab_size": 129280, "hidden_size": 7168,
                    "intermediate_size": 18432, "moe_intermediate_size": 2048, "num_hidden_layers": 61,
                    "num_attention_heads": 128, "num_key_value_heads": 128, "n_shared_experts": 1,
                    "n_routed_experts": 256, "num_experts_per_tok": 8, "first_k_dense_replace": 3},
    "gpt2": {"vocab_size": 50257, "n_positions": 1024, "n_embd": 768, "n_layer": 12, "n_head": 12,
             "activation_function": "gelu_new", "tie_word_embeddings": True},
    "gpt_neox": {"vocab_size": 50432, "hidden_size": 6144, "num_hidden_layers": 44, "num_attention_heads": 64,
                 "intermediate_size": 24576, "hidden_act": "gelu", "tie_word_embeddings": False},
}
GATED_TYPES = {"llama", "mistral", "mixtral", "qwen2", "qwen3", "qwen2_moe", "qwen3_moe", "deepseek_v2",
               "deepseek_v3"}
LEARNED_POSITIONS = {"gpt2": "n_positions"}

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
    "shared_ffn": ("shared_expert_intermediate_size", "moe_shared_expert_intermediate_size"),
    "head_dim_": ("head_dim", "kv_channels"),
    "dense_layers": ("first_k_dense_replace",),
    "q_lora": ("q_lora_rank",),
    "kv_lora": ("kv_lora_rank",),
    "rope_dim": ("qk_rope_head_dim", "qk_pos_emb_head_dim"),
    "nope_dim": ("qk_nope_head_dim", "qk_head_dim"),
    "v_dim": ("v_head_dim",),
}
_GATED = ("silu", "swiglu", "swish")


def _pick(doc: dict[str, Any], field: str) -> int | None:
    for key in _KEYS[field]:
        value = doc.get(key)
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    return None


def with_class_defaults(doc: dict[str, Any]) -> dict[str, Any]:
    """The config as its class reads it: transformers' config class when installed, else HF_DEFAULTS."""
    model_type = str(doc.get("model_type") or "")
    try:
        from transformers import AutoConfig  # type: ignore[import-not-found]  # optional: not a dependency
    except ImportError:
        AutoConfig = None
    if AutoConfig is not None and model_type:
        try:
            return {**AutoConfig.for_model(model_type, **doc).to_dict(), **doc}
        except (ValueError, KeyError, TypeError):
            pass  # a model_type this transformers does not know: the table below
    return {**HF_DEFAULTS.get(model_type, {}), **doc}


def _megatron(doc: dict[str, Any]) -> dict[str, Any]:
    """Megatron arguments as a mapping (`--num-layers` or `num_layers`)."""
    return {str(k).lstrip("-").replace("-", "_"): v for k, v in doc.items()}


def _key_of(doc: dict[str, Any], field: str) -> str | None:
    """The key `_pick` read `field` from (for messages)."""
    return next((k for k in _KEYS[field] if isinstance(doc.get(k), int) and not isinstance(doc.get(k), bool)), None)


def from_dict(doc: dict[str, Any], name: str, source: str) -> ModelShape:
    doc = with_class_defaults(_megatron(doc))
    model_type = str(doc.get("model_type") or "")
    core = ("layers", "hidden", "heads", "kv_heads", "ffn", "vocab", "experts", "top_k", "expert_ffn", "shared_experts")
    check_numbers({f: _pick(doc, f) for f in core}, source, {f: k for f in core if (k := _key_of(doc, f))})
    found = {f: _pick(doc, f) or 0 for f in _KEYS}
    required = ["layers", "hidden", "heads", "vocab"] + (["top_k"] if found["experts"] else [])
    missing = [f for f in required if not found[f]]
    if missing:
        raise ModelError(f"{source}: missing {', '.join(missing)} (looked for "
                         + "; ".join(f"{f}: {'/'.join(_KEYS[f])}" for f in missing) + ")")
    act = str(doc.get("hidden_act") or doc.get("activation_function") or doc.get("activation") or "").lower()
    gated = model_type in GATED_TYPES or bool(doc.get("swiglu")) or any(g in act for g in _GATED)
    experts = found["experts"]
    ffn = found["ffn"] or (0 if experts else 4 * found["hidden"])  # GPT's 4h when unstated (Narayanan et al.)
    mla = bool(found["kv_lora"]) and (model_type.startswith("deepseek") or bool(doc.get("multi_latent_attention")))
    position_key = LEARNED_POSITIONS.get(model_type)
    if position_key is None and doc.get("position_embedding_type", "learned_absolute") == "learned_absolute" \
            and "num_layers" in doc:  # Megatron's default position embedding
        position_key = "max_position_embeddings"
    positions = doc.get(position_key) if position_key else 0
    tied = not (doc.get("tie_word_embeddings") is False or doc.get("untie_embeddings_and_output_weights"))
    shape = ModelShape(
        name=name, layers=found["layers"], hidden=found["hidden"], heads=found["heads"],
        kv_heads=found["kv_heads"] or found["heads"], ffn=ffn, vocab=found["vocab"], experts=experts,
        top_k=found["top_k"] if experts else 0, expert_ffn=(found["expert_ffn"] or ffn) if experts else 0,
        shared_experts=found["shared_experts"] if experts else 0, gated_mlp=gated, source=source,
        tied_embeddings=tied, head_dim_=0 if mla else found["head_dim_"],
        dense_layers=min(found["dense_layers"], found["layers"]) if experts else 0,
        shared_ffn=found["shared_ffn"] if experts else 0,
        q_lora=found["q_lora"] if mla else 0, kv_lora=found["kv_lora"] if mla else 0,
        rope_dim=found["rope_dim"] if mla else 0, nope_dim=found["nope_dim"] if mla else 0,
        v_dim=found["v_dim"] if mla else 0, positions=positions if isinstance(positions, int) else 0)
    check(shape, source)
    return shape


def check(shape: ModelShape, source: str) -> None:
    """Numbers no model can have: not positive, heads not a multiple of the KV heads, top-k above the experts."""
    sizes = {"layers": shape.layers, "hidden": shape.hidden, "heads": shape.heads, "kv_heads": shape.kv_heads,
             "vocab": shape.vocab}
    bad = [f"{k} = {v}" for k, v in sizes.items() if v <= 0]
    bad += [f"{k} = {getattr(shape, k)}" for k in ("ffn", "experts", "top_k", "expert_ffn", "shared_experts",
                                                    "dense_layers") if getattr(shape, k) < 0]
    if bad:
        raise ModelError(f"{source}: sizes must be positive: {', '.join(bad)}")
    if shape.heads % shape.kv_heads:
        raise ModelError(f"{source}: {shape.heads} attention heads are not a multiple of {shape.kv_heads} KV heads")
    if shape.moe and shape.top_k > shape.experts:
        raise ModelError(f"{source}: top_k {shape.top_k} is more than the {shape.experts} experts")


def from_config(path: str | Path) -> ModelShape:
    """A HF / Megatron config as JSON, or as YAML (.yaml/.yml; a nanotron config's `model.model_config`)."""
    path = Path(path)
    yaml_file = path.suffix.lower() in (".yaml", ".yml")
    try:
        text = path.read_text(encoding="utf-8")
        if yaml_file:
            import yaml

            doc = yaml.safe_load(text)
        else:
            doc = json.loads(text)
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ModelError(f"{path}: cannot read the model config: {exc}") from None
    except Exception as exc:  # yaml.YAMLError: yaml is imported only for YAML files
        raise ModelError(f"{path}: not valid YAML: {exc}") from None
    nested = doc.get("model") if isinstance(doc, dict) else None
    if yaml_file and isinstance(nested, dict) and isinstance(nested.get("model_config"), dict):
        doc = nested["model_config"]  # nanotron: model: {model_config: {hidden_size: ...}}
    if not isinstance(doc, dict):
        raise ModelError(f"{path}: a model config must be a {'YAML mapping' if yaml_file else 'JSON object'}")
    return from_dict(doc, path.stem, str(path))
