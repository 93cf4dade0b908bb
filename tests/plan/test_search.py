"""Layout search: valid layouts only, ranked by step time, model-parallel groups kept in the fast domain."""

from __future__ import annotations

from dataclasses import replace

import pytest

from migrator.plan import cost
from migrator.plan.assumptions import Assumptions
from migrator.plan.clusters import Figure, MissingFigure, load
from migrator.plan.cost import Layout
from migrator.plan.model import ModelShape
from migrator.plan.search import Job, estimate, layouts, search
from tests.conftest import REPO

# Link placement under test: without the fixed MoE dispatch time, which favours fewer, larger micro-batches
# over any TP / EP split (tests/plan/test_moe_dispatch.py covers that term).
PLACEMENT = Assumptions(moe_dispatch_s=0.0)
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


@pytest.mark.parametrize("config", ["deepseek-v3", "mixtral-8x7b"])
def test_moe_on_the_supernode_gets_ep_inside_the_domain_and_a_small_domain_moves_it_to_scale_out(config, tmp_path):
    from migrator.plan.configs import from_config

    model = from_config(REPO / "tests" / "plan" / "data" / f"{config}.json")
    supernode = load(["supernode-384"])[0]
    job = Job(model, 3072, 4096, assumptions=PLACEMENT)
    result = search(job, supernode, top=3)
    best = result["top"][0]
    assert best.layout.ep > 1 and best.links["ep"] == "domain" and best.comm_links["ep all-to-all"] == "domain"
    assert any(f"EP {best.layout.ep} across the scale-out network would cost" in w for w in result["why"])
    assert all(e.fits for e in result["top"])
    assert [e.step_s for e in result["top"]] == sorted(e.step_s for e in result["top"])
    # EP wins: the fastest layout without expert parallelism is slower
    no_ep = [e for e in (estimate(job, supernode, replace(best.layout, ep=1)),) if e.fits]
    assert all(e.step_s > best.step_s for e in no_ep)
    # the same layout on supernode-sized figures with an 8-device domain: EP (and a TP 16 group) go scale-out
    (tmp_path / "pyproject.toml").write_text('[tool.migrate.clusters.small]\nbase = "supernode-384"\ndomain_size = 8\n')
    small = load(["small"], tmp_path)[0]
    spread = Layout(tp=2, dp=384, ep=8, zero=1)  # a TP x EP group of 16 devices
    inside, moved = estimate(job, supernode, spread), estimate(job, small, spread)
    assert inside.comm_links["ep all-to-all"] == "domain" and moved.comm_links["ep all-to-all"] == "scale-out"
    assert moved.comm_s["ep all-to-all"] > inside.comm_s["ep all-to-all"]
    wide = estimate(job, small, Layout(tp=16, dp=48, ep=8, zero=1))
    assert wide.comm_links["tp all-gather/reduce-scatter"] == "scale-out"
    assert wide.comm_s["tp all-gather/reduce-scatter"] > estimate(
        job, supernode, Layout(tp=16, dp=48, ep=8, zero=1)).comm_s["tp all-gather/reduce-scatter"]


def test_mixtral_8x22b_on_the_supernode_keeps_tp_inside_the_domain():
    result = search(Job(MIXTRAL_8X22B, 1024, 4096, assumptions=PLACEMENT), load(["supernode-384"])[0])
    best = result["top"][0]
    assert best.layout.tp > 1 and best.links["tp"] == "domain"
    assert any("across the scale-out network would cost" in w for w in result["why"])


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
    pipe = est.step_s - est.bubble_s - est.comm_s.get("dp gradient reduce", 0.0)
    assert est.bubble_s == pytest.approx(3 / 256 * pipe)


@pytest.mark.parametrize("schedule, vpp, fraction", [
    ("1f1b", 2, 7 / (64 * 2)), ("zero-bubble", 1, 7 / (3 * 64)), ("dualpipe", 1, 3 * 2 / (3 * 64))])
def test_interleaved_zero_bubble_and_dualpipe_shrink_the_bubble(schedule, vpp, fraction):
    cluster = load(["a100-dgx"])[0].with_devices(64)
    job = Job(GPT_39B, 64, 2048, assumptions=replace(cost.Assumptions(), schedule=schedule))
    est = estimate(job, cluster, Layout(tp=8, pp=8, dp=1, zero=0, vpp=vpp))
    pipe = est.step_s - est.bubble_s
    assert est.bubble_s == pytest.approx(fraction * pipe)
    assert est.schedule == ("interleaved" if vpp > 1 else schedule)


def test_dp_overlap_hides_the_gradient_reduce_behind_the_last_backward():
    cluster = load(["a100-dgx"])[0].with_devices(64)
    lay = Layout(tp=8, dp=8, zero=1)
    hidden = estimate(Job(GPT_39B, 64, 2048), cluster, lay)
    exposed = estimate(Job(GPT_39B, 64, 2048, assumptions=replace(cost.Assumptions(), dp_overlap=0.0)), cluster, lay)
    total = exposed.comm_s["dp gradient reduce"]
    assert total > 0 and hidden.overlapped_s["dp gradient reduce"] > 0
    assert hidden.comm_s["dp gradient reduce"] + hidden.overlapped_s["dp gradient reduce"] == pytest.approx(total)
    assert hidden.step_s < exposed.step_s


def test_small_gemms_run_below_the_large_gemm_efficiency():
    from migrator.plan.assumptions import Assumptions
    from migrator.plan.compute import Device, gemm_s

    dev, a = Device(312e12, 2.0e12), Assumptions()
    efficiency = lambda m, k, n: 2 * m * k * n / gemm_s(m, k, n, dev, a) / dev.peak_flops  # noqa: E731
    assert efficiency(8192, 8192, 8192) == pytest.approx(a.gemm_efficiency, rel=0.05)
    assert efficiency(64, 4096, 1024) < 0.5 * a.gemm_efficiency
    assert efficiency(64, 4096, 1024) < efficiency(512, 4096, 1024) < efficiency(4096, 4096, 1024)


def test_more_expert_parallelism_means_more_tokens_per_expert_and_faster_expert_gemms():
    cluster = load(["supernode-384"])[0]
    job = Job(MIXTRAL_8X22B, 1024, 4096)
    one = estimate(job, cluster, Layout(tp=4, pp=4, dp=24, ep=1, zero=1))
    eight = estimate(job, cluster, Layout(tp=4, pp=4, dp=24, ep=8, zero=1))
    assert eight.compute_parts["compute: experts"] < one.compute_parts["compute: experts"]


def test_a_model_that_cannot_fit_says_how_much_it_needs():
    cluster = load(["a100-dgx"])[0]
    result = search(Job(replace(GPT_39B, layers=480), 8, 2048), cluster)
    assert not result["top"] and "no layout fits in memory" in result["why"][0] and "GB per device" in result["why"][0]


def test_missing_figures_are_all_named_at_once():
    a2 = load(["a2-8x"])[0]
    bare = a2.with_figures({k: Figure(None, "user", "unset") for k in ("domain_GBps", "hbm_GBps", "peak_tflops_bf16")})
    with pytest.raises(MissingFigure, match=r"domain_GBps, hbm_GBps, peak_tflops_bf16"):
        search(Job(GPT_39B, 512, 2048), bare)


def test_a_small_batch_uses_fewer_devices_and_says_so():
    tiny = ModelShape("tiny-moe", 2, 32, 4, 4, 0, 64, experts=4, top_k=2, expert_ffn=64, gated_mlp=True)
    result = search(Job(tiny, 16, 64), load(["supernode-384"])[0])
    assert result["world"] < 768 and any(f"uses {result['world']} of 768 devices" in w for w in result["why"])


def test_capacity_factor_pads_the_expert_gemms_and_the_all_to_all():
    cluster = load(["supernode-384"])[0]
    lay = Layout(tp=4, pp=4, dp=24, ep=8, zero=1)
    even = estimate(Job(MIXTRAL_8X22B, 1024, 4096), cluster, lay)
    padded = estimate(Job(MIXTRAL_8X22B, 1024, 4096, assumptions=replace(cost.Assumptions(), capacity_factor=1.25)),
                      cluster, lay)
    assert padded.comm_s["ep all-to-all"] == pytest.approx(1.25 * even.comm_s["ep all-to-all"])
    assert padded.compute_parts["compute: experts"] > 1.2 * even.compute_parts["compute: experts"]


def test_node_limited_routing_cuts_the_scale_out_all_to_all():
    from migrator.plan.configs import from_config

    v3 = from_config(REPO / "tests" / "plan" / "data" / "deepseek-v3.json")
    cluster = load(["h100-dgx"])[0].with_devices(2048)
    lay = Layout(tp=1, pp=16, dp=128, ep=64, zero=1, sp=False)
    free = estimate(Job(v3, 15360, 4096), cluster, lay)
    limited = estimate(Job(v3, 15360, 4096, assumptions=replace(cost.Assumptions(), moe_domains=4)), cluster, lay)
    assert free.comm_links["ep all-to-all"] == "scale-out"
    assert limited.comm_s["ep all-to-all"] == pytest.approx(free.comm_s["ep all-to-all"] * 4 / 8, rel=0.01)


def test_virtual_stages_are_tried_on_the_bases_whose_bubble_they_could_remove():
    """Llama 3.1 405B FP8 (Megatron-Bridge's published layout, TP 8 CP 2 PP 8 VP 8): its VPP-1 base ranked
    below eight others, so the plain search never interleaved it and picked a layout it predicted slower."""
    from migrator.plan.configs import from_config

    model = from_config(REPO / "tests" / "plan" / "data" / "llama-3-405b.json")
    cluster = load(["h100-dgx"])[0]
    job = Job(model, 512, 8192, "fp8")
    published = estimate(job, cluster, Layout(tp=8, cp=2, pp=8, vpp=8, dp=8, zero=1))
    assert published.fits
    pick = search(job, cluster, world=1024, top=1)["top"][0]
    assert pick.step_s <= published.step_s
