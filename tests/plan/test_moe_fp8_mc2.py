"""The MoE, FP8, Ulysses, MC2 and pipeline-stage terms: each on a hand-computed case, and named in the plan."""

from __future__ import annotations

from dataclasses import replace

import pytest
from click.testing import CliRunner

from migrator.cli import main
from migrator.plan import cost
from migrator.plan.assumptions import Assumptions
from migrator.plan.clusters import load
from migrator.plan.compute import Device, best_last_stage, gemm_split, layer_forward_s, microbatch_s
from migrator.plan.cost import Layout
from migrator.plan.model import ModelShape
from migrator.plan.search import Job, estimate
from tests.conftest import REPO

H100 = Device(989e12, 3.35e12)
H100_FP8 = Device(989e12, 3.35e12, 1979e12)
MOE = ModelShape("moe", 8, 1024, 16, 16, 4096, 32000, experts=8, top_k=2, expert_ffn=2048, gated_mlp=True)
DATA = REPO / "tests" / "plan" / "data"


def test_a_large_fp8_gemm_runs_at_the_fp8_peak_plus_its_cast_and_a_small_one_stays_bf16():
    a = Assumptions()
    m = k = n = 8192
    gemm, cast = gemm_split(m, k, n, H100_FP8, a)
    assert gemm == pytest.approx(2 * m * k * n / (1979e12 * a.gemm_efficiency) + a.gemm_overhead_s, rel=1e-9)
    assert cast == pytest.approx(4 * (m * k + k * n) / 3.35e12, rel=1e-9)  # 4 bytes per operand element
    bf16 = sum(gemm_split(m, k, n, H100, a))
    assert 0.5 * bf16 < gemm + cast < 0.7 * bf16  # not "twice the peak": the cast eats part of the gain
    small_gemm, small_cast = gemm_split(64, 4096, 1024, H100_FP8, a)
    assert small_cast == 0.0 and small_gemm == pytest.approx(sum(gemm_split(64, 4096, 1024, H100, a)))


def test_under_fp8_the_attention_core_stays_bf16_and_the_cast_is_its_own_part():
    a = Assumptions()
    dense = replace(MOE, experts=0, top_k=0, expert_ffn=0, hidden=8192, heads=64, kv_heads=8, ffn=28672)
    bf16 = layer_forward_s(dense, 8192, 8192, Layout(), H100, a, False)
    fp8 = layer_forward_s(dense, 8192, 8192, Layout(), H100_FP8, a, False)
    assert fp8["attention"] == bf16["attention"]
    assert fp8["gemm"] < 0.6 * bf16["gemm"] and fp8["fp8 quantize"] > 0 and bf16["fp8 quantize"] == 0


def test_moe_permute_router_and_imbalance_on_a_hand_computed_layer():
    a = Assumptions(gemm_model="constant")
    tokens = 4096
    parts = layer_forward_s(MOE, tokens, 4096, Layout(sp=False), H100, a, True)
    routed = tokens * MOE.top_k  # ep 1, capacity 1: every top-k copy lands on this device
    assert parts["moe permute"] == pytest.approx(4 * routed * 1024 * 2 / 3.35e12)
    router = 2 * tokens * 1024 * 8 / (989e12 * a.gemm_efficiency) + 3 * tokens * 8 * 4 / 3.35e12
    assert parts["moe router"] == pytest.approx(router)
    skewed = layer_forward_s(MOE, tokens, 4096, Layout(sp=False), H100, replace(a, moe_imbalance=1.5), True)
    assert skewed["experts"] == pytest.approx(1.5 * parts["experts"])  # the busiest device waits for the rest
    assert skewed["moe permute"] == pytest.approx(1.5 * parts["moe permute"])


def test_expert_tp_1_keeps_whole_experts_per_rank_and_their_state_over_ep_only():
    even = cost.model_state_bytes(MOE, Layout(tp=4, dp=8, ep=8))
    etp1 = cost.model_state_bytes(MOE, Layout(tp=4, dp=8, ep=8, etp=1))
    experts = MOE.params()["experts"]
    assert etp1["weights"] - even["weights"] == pytest.approx(2 * experts / 8 * (1 - 1 / 4))


def test_ulysses_context_parallelism_is_an_all_to_all_not_an_all_gather():
    cluster = load(["h100-dgx"])[0]
    model = replace(MOE, experts=0, top_k=0, expert_ffn=0)
    lay = Layout(tp=1, cp=2, dp=4, zero=1)
    ring = estimate(Job(model, 64, 8192), cluster, lay)
    ulysses = estimate(Job(model, 64, 8192, assumptions=Assumptions(cp_comm="ulysses")), cluster, lay)
    assert "cp all-gather K/V" in ring.comm_s and "cp all-gather K/V" not in ulysses.comm_s
    width = 16 * 64 * 2 * 2  # Q, K, V and the output: (heads + kv heads) x (d_qk + d_v)
    one = cost.all_to_all_s(1 * 4096 * width * 2, 2, 450, Assumptions())
    assert ulysses.comm_s["cp all-to-all (Ulysses)"] == pytest.approx(2 * 8 * one * (64 // 4))


def test_mc2_hides_tp_traffic_inside_its_matmuls_and_only_on_ascend():
    a2 = load(["a2-8x"])[0]
    job = Job(replace(MOE, experts=0, top_k=0, expert_ffn=0, hidden=8192, heads=64, kv_heads=8, ffn=28672), 64, 4096)
    plain = estimate(job, a2, Layout(tp=8, dp=1, zero=0))
    fused = estimate(job, a2, Layout(tp=8, dp=1, zero=0, mc2=True))
    name = "tp all-gather/reduce-scatter (MC2 fused)"
    raw = plain.comm_s["tp all-gather/reduce-scatter"]
    assert fused.overlapped_s[name] == pytest.approx(min(0.75 * raw, fused.compute_parts["compute: gemm"]))
    assert fused.step_s < plain.step_s
    from migrator.plan.estimate import layout_problems

    assert any(p.startswith("mc2:") for p in layout_problems(job, load(["h100-dgx"])[0], Layout(tp=8, mc2=True)))


def test_the_lm_head_sits_on_the_last_stage_and_a_lighter_last_stage_balances_it():
    model = ModelShape("wide-vocab", 16, 4096, 32, 32, 16384, 256000)
    a, lay = Assumptions(), Layout(pp=4, dp=1, zero=0)
    even = sum(microbatch_s(model, lay, 4096, H100, a).values())
    last = best_last_stage(model, lay, 4096, H100, a)
    assert 0 < last < 4
    assert sum(microbatch_s(model, replace(lay, last=last), 4096, H100, a).values()) < even


def _plan(*args: str) -> str:
    result = CliRunner().invoke(main, ["plan", *args])
    assert result.exit_code in (0, 1), result.output
    return result.output


def test_the_plan_breakdown_names_the_moe_fp8_and_mc2_terms():
    moe = _plan("--model", str(DATA / "mixtral-8x7b.json"), "--cluster", "h100-dgx", "--devices", "16", "--dtype",
                "fp8", "--global-batch", "64", "--seq", "4096", "--layout", "tp=2,pp=1,dp=8,ep=8,zero=1")
    assert "moe router" in moe and "moe permute" in moe and "fp8 quantize" in moe
    mc2 = _plan("--model", str(DATA / "llama-3-70b.json"), "--cluster", "a2-8x", "--devices", "32",
                "--global-batch", "64", "--seq", "4096", "--layout", "tp=8,pp=4,dp=1,zero=0,mc2=on")
    assert "MC2 fused" in mc2


@pytest.mark.parametrize("run", ["korthikanti-175b", "mindformers-llama2-70b"])
def test_the_search_never_picks_a_layout_predicted_slower_than_a_published_one_that_fits(run, tmp_path):
    import importlib.util

    spec = importlib.util.spec_from_file_location("plan_published", REPO / "bench" / "plan_published.py")
    assert spec and spec.loader
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    import yaml

    row = bench.evaluate(run, yaml.safe_load((REPO / "bench" / "data" / "published_runs.yaml").read_text())[run],
                         tmp_path)
    assert not row["problems"] and row["why"]
    assert "slower than the given layout" not in row["why"][0]


def test_expert_tp_gathers_the_routed_tokens_over_its_group_after_the_all_to_all():
    from migrator.plan.estimate import ETP_GATHER

    cluster = load(["h100-dgx"])[0]
    job = Job(MOE, 32, 4096)
    lay = Layout(tp=2, dp=4, ep=2, zero=1, recompute="selective")
    got = estimate(job, cluster, lay)
    rows = 1 * 4096 * MOE.top_k  # the TP group's tokens, each top-k copy (capacity 1, balanced)
    one = cost.all_gather_s(rows * MOE.hidden * 2, 2, 450, Assumptions())
    microbatches = 32 // 4
    # dispatch all-gather + combine reduce-scatter, forward and backward, on each of the 8 MoE layers
    assert got.comm_s[ETP_GATHER] == pytest.approx(4 * 8 * one * microbatches)
    assert ETP_GATHER not in estimate(job, cluster, replace(lay, etp=1)).comm_s  # whole experts: nothing to gather


def test_compute_beside_a_hidden_collective_loses_the_units_it_lends():
    cluster = load(["h100-dgx"])[0]
    lay = Layout(tp=1, pp=4, dp=8, ep=8, zero=1)
    free = estimate(Job(MOE, 256, 4096, assumptions=Assumptions(schedule="dualpipe")), cluster, lay)
    lent = estimate(Job(MOE, 256, 4096, assumptions=Assumptions(schedule="dualpipe", comm_sm_share=0.15)), cluster, lay)
    hidden = sum(v for k, v in free.overlapped_s.items() if k != "dp gradient reduce")  # the micro-batches' own
    assert free.overlapped_s["ep all-to-all"] > 0  # DualPipe hides the all-to-all
    pipe = lent.step_s - lent.bubble_s - free.step_s + free.bubble_s  # the bubble scales with the pipelined time
    assert pipe == pytest.approx(0.15 * hidden, rel=1e-6)
    assert lent.compute_parts["compute: units lent to overlapped collectives"] == pytest.approx(0.15 * hidden)


def test_a_published_fp8_layout_fits_once_the_linear_inputs_are_kept_in_fp8():
    """Megatron-Bridge's Llama 3 70B FP8 run (TP 4 PP 8 VP 5, 64 H100, bench/data/published_runs.yaml) ran in
    80 GB; with every activation in bf16 the model said it needs more than 72 GB."""
    from migrator.plan.configs import from_config

    model = from_config(DATA / "llama-3-70b.json")
    cluster = load(["h100-dgx"])[0]
    lay = Layout(tp=4, pp=8, vpp=5, dp=2, zero=1)
    fp8 = estimate(Job(model, 128, 8192, "fp8"), cluster, lay)
    assert fp8.fits
    bf16 = cost.activation_bytes(model, lay, 8192, 64, "flash", schedule="interleaved")
    assert fp8.memory["total"] - fp8.memory["activations"] - fp8.memory["backward working set"] + bf16 > 72e9
