"""Model shapes from config JSON and from the program (meta device, child process)."""

from __future__ import annotations

import json

import pytest

from migrator.plan.configs import from_config
from migrator.plan.model import ModelError, ModelShape
from migrator.plan.probe import probe_tree
from tests.conftest import REPO

LLAMA_70B = {"num_hidden_layers": 80, "hidden_size": 8192, "num_attention_heads": 64, "num_key_value_heads": 8,
             "intermediate_size": 28672, "vocab_size": 128256, "hidden_act": "silu",
             "tie_word_embeddings": False}


def test_hf_config(tmp_path):
    path = tmp_path / "llama-70b.json"
    path.write_text(json.dumps(LLAMA_70B))
    shape = from_config(path)
    assert (shape.layers, shape.hidden, shape.heads, shape.kv_heads, shape.ffn, shape.vocab) == \
        (80, 8192, 64, 8, 28672, 128256)
    assert shape.gated_mlp and not shape.moe
    assert shape.params()["total"] == pytest.approx(70.55e9, rel=0.005)  # Llama 2/3 70B: 70.55B


def test_megatron_style_moe_config(tmp_path):
    path = tmp_path / "moe.json"
    path.write_text(json.dumps({"num_layers": 16, "hidden_size": 2048, "num_attention_heads": 16,
                                "num_query_groups": 4, "ffn_hidden_size": 5632, "padded_vocab_size": 50304,
                                "num_experts": 64, "moe_router_topk": 8, "moe_ffn_hidden_size": 1024,
                                "swiglu": True}))
    shape = from_config(path)
    assert (shape.kv_heads, shape.experts, shape.top_k, shape.expert_ffn, shape.gated_mlp) == (4, 64, 8, 1024, True)


def test_a_moe_config_must_say_how_many_experts_a_token_uses(tmp_path):
    path = tmp_path / "moe.json"
    path.write_text(json.dumps({"num_layers": 2, "hidden_size": 64, "num_attention_heads": 4, "vocab_size": 10,
                                "num_experts": 8}))
    with pytest.raises(ModelError, match="missing top_k"):
        from_config(path)


def test_a_config_without_required_keys_names_the_file_and_the_keys(tmp_path):
    path = tmp_path / "bad.json"
    path.write_text(json.dumps({"hidden_size": 8}))
    with pytest.raises(ModelError, match=r"bad\.json: missing layers, heads, vocab"):
        from_config(path)
    path.write_text("{not json")
    with pytest.raises(ModelError, match=r"bad\.json: cannot read"):
        from_config(path)


@pytest.mark.slow
def test_probe_reads_the_samples_on_the_meta_device():
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(2) as pool:  # two child processes, each mostly importing torch: side by side
        gpt, moe = pool.map(probe_tree, [str(REPO / "samples" / "gpt"), str(REPO / "samples" / "moe")])
    assert (gpt.layers, gpt.hidden, gpt.heads, gpt.kv_heads, gpt.vocab) == (2, 64, 4, 2, 64)
    assert (moe.layers, moe.hidden, moe.heads, moe.experts, moe.top_k, moe.expert_ffn) == (2, 32, 4, 4, 2, 64)
    assert moe.shared_experts == 1


@pytest.mark.slow
def test_probe_of_a_broken_tree_says_why(tmp_path):
    (tmp_path / "validate.py").write_text("raise RuntimeError('boom')\n")
    with pytest.raises(ModelError, match="boom"):
        probe_tree(str(tmp_path))


def test_active_parameters_of_a_moe_layer():
    moe = ModelShape("m", 1, 100, 4, 4, 0, 10, experts=8, top_k=2, expert_ffn=50, gated_mlp=True)
    assert moe.active_linear_params() == moe.attention_params() + 2 * 3 * 100 * 50
