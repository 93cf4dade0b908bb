"""Layout search: valid layouts only, ranked by step time, model-parallel groups kept in the fast domain."""

from __future__ import annotations

from dataclasses import replace

import pytest

from migrator.plan import cost
from migrator.plan.clusters import MissingFigure, load
from migrator.plan.cost import Layout
from migrator.plan.model import ModelShape
from migrator.plan.search import Job, estimate, layouts, search

MIXTRAL_8X22B = ModelShape("mixtral-8x22b", 56, 6144, 48, 8, 16384, 32768, experts=8, top_k=2, expert_ffn=16384,
                           gated_mlp=True, tied_embeddings=False)
GPT_39B = ModelShape("gpt-39b", 48, 8192, 64, 64, 4 * 8192, 51200)


def test_every_layout_divides_heads_experts_and_batch():
    job = Job(MIXTRAL_8X22B, 1024, 4096)
    found = layouts(job, 256)
    assert found
    for lay in found:
        assert lay.world == 256
        assert MIXTRAL_8X22B.heads % lay.tp == 0 and MIXTRAL_8X22B.kv_heads % lay.tp == 0
        assert 1024 % (lay.dp * lay.micro_batch) == 0
        assert MIXTRAL_8X22B.experts % lay.ep == 0 and lay.dp % lay.ep == 0
        assert lay.pp <= MIXTRAL_8X22B.layers


def test_moe_on_two_supernodes_keeps_tp_and_ep_inside_the_domain():
    cluster = load(["supernode-384"])[0].with_devices(768)
    result = search(Job(MIXTRAL_8X22B, 1024, 4096), cluster)
    best = result["top"][0]
    assert best.layout.tp > 1 and best.layout.ep > 1
    assert best.links["tp"] == "domain" and best.links["ep"] == "domain"
    assert any("across the scale-out network would cost" in w for w in result["why"])
    assert all(e.fits for e in result["top"])
    assert [e.step_s for e in result["top"]] == sorted(e.step_s for e in result["top"])


def test_long_sequences_bring_context_parallelism_inside_the_domain():
    llama_8b = ModelShape("llama-8b", 32, 4096, 32, 8, 14336, 128256, gated_mlp=True, tied_embeddings=False)
    supernode = load(["supernode-384"])[0].with_devices(64)
    best = search(Job(llama_8b, 64, 131072), supernode)["top"][0]
    assert best.layout.cp > 1 and 131072 % (2 * best.layout.cp) == 0 and best.links["cp"] == "domain"
    dgx = load(["h100-dgx"])[0].with_devices(64)
    assert search(Job(llama_8b, 64, 131072), dgx)["top"][0].layout.cp > 1
    assert search(Job(llama_8b, 64, 4096), dgx)["top"][0].layout.cp == 1


def test_context_parallel_activations_hold_s_over_cp_tokens():
    model = GPT_39B
    whole = cost.activation_bytes(model, Layout(tp=8), 32768, 1, "flash")
    split = cost.activation_bytes(model, Layout(tp=8, cp=4), 32768, 1, "flash")
    assert split == pytest.approx(whole / 4)


def test_dense_model_on_eight_dgx_keeps_tp_inside_nvlink():
    cluster = load(["a100-dgx"])[0].with_devices(64)
    best = search(Job(GPT_39B, 512, 2048), cluster)["top"][0]
    assert best.layout.tp <= 8 and best.links["tp"] == "domain"


def test_forcing_a_group_onto_the_scale_out_network_costs_time():
    cluster = load(["supernode-384"])[0]
    job = Job(MIXTRAL_8X22B, 1024, 4096)
    lay = Layout(tp=8, pp=4, dp=12, ep=4, zero=1, recompute="selective")
    inside = estimate(job, cluster, lay)
    across = estimate(job, cluster, lay, {"tp": "scale-out"})
    assert inside.links["tp"] == "domain" and across.step_s > inside.step_s


def test_pipeline_bubble_is_p_minus_1_over_m():
    cluster = load(["a100-dgx"])[0].with_devices(64)
    est = estimate(Job(GPT_39B, 512, 2048), cluster, Layout(tp=8, pp=4, dp=2, zero=0, recompute="full"))
    assert est.microbatches == 256
    pipe = est.step_s - est.bubble_s - est.comm_s.get("dp gradient all-reduce", 0.0)
    assert est.bubble_s == pytest.approx(3 / 256 * pipe)


def test_a_model_that_cannot_fit_says_how_much_it_needs():
    cluster = load(["a100-dgx"])[0]
    result = search(Job(replace(GPT_39B, layers=480), 8, 2048), cluster)
    assert not result["top"] and "no layout fits in memory" in result["why"][0] and "GB per device" in result["why"][0]


def test_missing_figures_are_all_named_at_once():
    with pytest.raises(MissingFigure, match=r"domain_GBps, hbm_GBps, peak_tflops_bf16"):
        search(Job(GPT_39B, 512, 2048), load(["a2-8x"])[0])


def test_a_small_batch_uses_fewer_devices_and_says_so():
    tiny = ModelShape("tiny-moe", 2, 32, 4, 4, 0, 64, experts=4, top_k=2, expert_ffn=64, gated_mlp=True)
    result = search(Job(tiny, 16, 64), load(["supernode-384"])[0])
    assert result["world"] < 384 and any(f"uses {result['world']} of 384 devices" in w for w in result["why"])
