"""Model shapes from real configs: the config class's defaults, MLA, first-k dense, shared experts, and
parameter counts within 1 % of each family's published total (configs and sources: tests/plan/data)."""

from __future__ import annotations

import json

import pytest

from migrator.plan.configs import from_config, from_dict
from migrator.plan.model import ModelError
from tests.conftest import REPO

DATA = REPO / "tests" / "plan" / "data"
PUBLISHED = {  # file -> published total parameters (tests/plan/data/SOURCES.md)
    "llama-3-70b": 70.6e9, "llama-3-405b": 405.85e9, "mistral-7b": 7.24e9, "mixtral-8x7b": 46.7e9, "qwen2-72b": 72.7e9,
    "qwen3-8b": 8.2e9, "qwen1.5-moe-a2.7b": 14.3e9, "deepseek-v2": 236e9, "deepseek-v3": 671e9,
    "gpt2": 124e6, "gpt-neox-20b": 20.55e9, "megatron-gpt3-175b": 175e9,
}


@pytest.mark.parametrize("name", sorted(PUBLISHED))
def test_parameter_count_is_within_one_percent_of_the_published_total(name):
    shape = from_config(DATA / f"{name}.json")
    assert shape.params()["total"] == pytest.approx(PUBLISHED[name], rel=0.01)


def test_llama_without_hidden_act_is_swiglu_and_untied_by_its_class_default():
    shape = from_config(DATA / "llama-3-70b.json")
    assert shape.gated_mlp and not shape.tied_embeddings and shape.kv_heads == 8


def test_deepseek_v3_reads_mla_first_k_dense_and_the_shared_expert():
    shape = from_config(DATA / "deepseek-v3.json")
    assert shape.mla and (shape.q_lora, shape.kv_lora, shape.rope_dim, shape.v_dim) == (1536, 512, 64, 128)
    assert (shape.dense_layers, shape.moe_layers, shape.shared_experts, shape.experts) == (3, 58, 1, 256)
    active = shape.active_linear_params() * shape.layers + shape.vocab * shape.hidden
    assert active == pytest.approx(37e9, rel=0.03)  # 37B activated per token (report), embeddings once


def test_a_config_with_only_model_type_takes_every_size_from_the_class():
    shape = from_dict({"model_type": "mistral"}, "m", "m.json")
    assert (shape.layers, shape.hidden, shape.kv_heads, shape.ffn, shape.vocab) == (32, 4096, 8, 14336, 32000)
    assert shape.gated_mlp


def test_gpt2_keeps_its_tied_embedding_and_learned_positions_and_neox_is_not_gated():
    gpt2 = from_config(DATA / "gpt2.json")
    assert gpt2.tied_embeddings and gpt2.positions == 1024 and not gpt2.gated_mlp
    assert not from_config(DATA / "gpt-neox-20b.json").gated_mlp


def test_qwen3_head_dim_and_qwen_moe_shared_expert_width():
    assert from_config(DATA / "qwen3-8b.json").head_dim == 128
    moe = from_config(DATA / "qwen1.5-moe-a2.7b.json")
    assert moe.shared_width() == 5632 and moe.expert_ffn == 1408


@pytest.mark.parametrize("doc, words", [
    ({"num_layers": 2, "hidden_size": 64, "num_attention_heads": 6, "num_query_groups": 4, "vocab_size": 10},
     "6 attention heads are not a multiple of 4 KV heads"),
    ({"num_layers": 0, "hidden_size": 64, "num_attention_heads": 4, "vocab_size": 10}, "layers = 0 (`num_layers`)"),
    ({"num_layers": 2, "hidden_size": -64, "num_attention_heads": 4, "vocab_size": 10}, "hidden = -64"),
    ({"num_layers": 2, "hidden_size": 64, "num_attention_heads": 4, "vocab_size": 10, "num_experts": 4,
      "moe_router_topk": 8}, "top_k 8 is more than the 4 experts"),
])
def test_impossible_model_numbers_name_the_file_and_the_number(tmp_path, doc, words):
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(doc))
    with pytest.raises(ModelError, match="bad.json") as err:
        from_config(path)
    assert words in str(err.value)


def test_a_nanotron_yaml_config_reads_like_its_hf_keys(tmp_path):
    from migrator.plan.configs import from_config

    path = tmp_path / "config.yaml"
    path.write_text("model:\n  model_config:\n    hidden_size: 2048\n    num_attention_heads: 16\n"
                    "    num_key_value_heads: 16\n    num_hidden_layers: 24\n    intermediate_size: 8192\n"
                    "    vocab_size: 32000\n")
    shape = from_config(path)
    assert (shape.hidden, shape.layers, shape.heads) == (2048, 24, 16)


def test_bad_yaml_config_names_the_file(tmp_path):
    import pytest

    from migrator.plan.configs import from_config
    from migrator.plan.model import ModelError

    path = tmp_path / "bad.yaml"
    path.write_text("model: [unclosed\n")
    with pytest.raises(ModelError, match=r"bad\.yaml: not valid YAML"):
        from_config(path)
