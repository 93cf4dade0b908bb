"""The cost model equals the published formulas it cites."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from migrator.plan import cost
from migrator.plan.cost import Assumptions, Layout
from migrator.plan.model import ModelShape


def gpt(layers=24, hidden=2048, heads=16, vocab=51200) -> ModelShape:
    return ModelShape("gpt", layers, hidden, heads, heads, 4 * hidden, vocab)


# no deadline: the examples are checked for their numbers, and a loaded machine made the 200 ms default fail
@settings(deadline=None)
@given(layers=st.integers(1, 128), hidden=st.sampled_from([512, 2304, 4096, 12288]), batch=st.integers(1, 4096),
       seq=st.sampled_from([512, 2048, 8192]), vocab=st.integers(1000, 256000))
def test_training_flops_are_narayanan_eq3(layers, hidden, batch, seq, vocab):
    model = gpt(layers, hidden, 16, vocab)
    for recompute, published in (("full", True), ("none", False)):
        ours = cost.training_flops(model, batch, seq, recompute)
        assert ours == pytest.approx(cost.narayanan_flops(batch, seq, layers, hidden, vocab, published), rel=1e-12)


def test_activations_per_layer_are_korthikanti():
    s, b, h, a, t = 2048, 4, 4096, 32, 8
    model = gpt(hidden=h, heads=a)

    def per_layer(tp, recompute, attention="flash", sp=True):
        return cost.activation_bytes_per_layer(model, s, b, tp, recompute, attention, dropout=True, sp=sp)

    assert per_layer(1, "none", "eager") == pytest.approx(s * b * h * (34 + 5 * a * s / h))
    assert per_layer(t, "none", "eager") == pytest.approx(s * b * h * (34 + 5 * a * s / h) / t)
    assert per_layer(t, "selective") == pytest.approx(s * b * h * 34 / t)
    assert per_layer(1, "full") == pytest.approx(2 * s * b * h)
    # tensor parallel without sequence parallelism: s b h (10 + 24 / t + 5 a s / (h t)) (Korthikanti eq. 2)
    assert per_layer(t, "none", "eager", sp=False) == pytest.approx(s * b * h * (10 + 24 / t + 5 * a * s / (h * t)))
    # flash attention keeps no s x s scores: the same as selective recomputation
    assert per_layer(t, "none", "flash") == per_layer(t, "selective")


def test_modern_activations_drop_the_dropout_masks_and_shrink_k_v_with_gqa():
    s, b, h, a = 2048, 1, 4096, 32
    mha = gpt(hidden=h, heads=a)
    assert cost.activation_bytes_per_layer(mha, s, b, 1, "selective") == pytest.approx(s * b * h * 32)
    assert cost.activation_bytes_per_layer(mha, s, b, 1, "none", "eager") == pytest.approx(s * b * h * (32 + 2 * a * s / h))
    gqa = ModelShape("gqa", 24, h, a, 8, 4 * h, 51200)  # K and V a quarter as wide: 4 bytes -> 1
    assert cost.activation_bytes_per_layer(gqa, s, b, 1, "selective") == pytest.approx(s * b * h * 29)


def test_activations_of_a_pipeline_stage_hold_min_pp_m_microbatches():
    model, s = gpt(layers=32), 2048
    one = cost.activation_bytes_per_layer(model, s, 1, 1, "selective")
    logits = 4 * s * model.vocab
    assert cost.activation_bytes(model, Layout(pp=1), s, 8, "flash") == pytest.approx(32 * one + logits)
    for pp, m in ((4, 16), (4, 2)):  # the first stage, fuller than the last (one micro-batch + the logits)
        got = cost.activation_bytes(model, Layout(pp=pp), s, m, "flash")
        assert got == pytest.approx(32 / pp * min(pp, m) * one) and 32 / pp * one + logits < got


def test_the_fp32_logits_sit_on_the_last_stage_only():
    model, s = gpt(layers=8, vocab=1_000_000), 2048  # a huge vocabulary: the last stage is the fuller one
    one = cost.activation_bytes_per_layer(model, s, 1, 1, "selective")
    logits = 4 * s * model.vocab
    got = cost.activation_bytes(model, Layout(pp=4), s, 16, "flash")
    assert got == pytest.approx(2 * one + logits)  # 1F1B: the last stage holds one micro-batch of its 2 layers
    assert got < 2 * 4 * one + logits


def test_fp8_training_keeps_the_linear_layers_inputs_as_one_byte():
    s, b, h = 2048, 1, 4096
    model = gpt(hidden=h, heads=32)  # MHA, MLP 4h, no dropout: 32 bytes per token and h
    bf16 = cost.activation_bytes_per_layer(model, s, b, 1, "selective")
    fp8 = cost.activation_bytes_per_layer(model, s, b, 1, "selective", fp8_inputs=True)
    # QKV input 2 -> 1, projection input 2 -> 1, fc1 input 2 -> 1, fc2 input (GELU output, 4h) 8 -> 4
    assert bf16 == pytest.approx(s * b * h * 32) and fp8 == pytest.approx(s * b * h * (32 - 1 - 1 - 1 - 4))
    gated = ModelShape("gated", 24, h, 32, 8, 14336, 51200, gated_mlp=True)
    saved = cost.activation_bytes_per_layer(gated, s, b, 1, "selective") - \
        cost.activation_bytes_per_layer(gated, s, b, 1, "selective", fp8_inputs=True)
    assert saved == pytest.approx(s * b * (h + h + h + 14336))  # the product (fc2's input) is f wide
    assert cost.activation_bytes_per_layer(model, s, b, 8, "full", fp8_inputs=True) == \
        cost.activation_bytes_per_layer(model, s, b, 8, "full")  # the layer input stays bf16


def test_model_state_is_16_bytes_per_parameter_sharded_by_zero_stage():
    model = gpt()
    n = model.params()["total"]
    d = 16
    total = lambda **kw: sum(cost.model_state_bytes(model, Layout(dp=d, **kw)).values())  # noqa: E731
    assert total(zero=0) == pytest.approx(16 * n)
    assert total(zero=1) == pytest.approx((2 + 2 + 12 / d) * n)
    assert total(zero=2) == pytest.approx((2 + (2 + 12) / d) * n)
    assert total(zero=3) == pytest.approx(16 * n / d)
    tp_pp = sum(cost.model_state_bytes(model, Layout(tp=4, pp=2, zero=0)).values())
    assert tp_pp == pytest.approx(16 * n / 8, rel=0.01)  # layers 24 / pp 2 divide evenly


def test_fp32_gradients_make_18_bytes_per_parameter_and_zero_2_shards_them():
    model = gpt()
    n = model.params()["total"]
    total = lambda **kw: sum(cost.model_state_bytes(model, Layout(dp=8, **kw), grad_bytes=4).values())  # noqa: E731
    assert total(zero=0) == pytest.approx(18 * n)
    assert total(zero=2) == pytest.approx((2 + (4 + 12) / 8) * n)


def test_experts_shard_over_ep_and_the_rest_of_dp():
    moe = ModelShape("moe", 4, 1024, 16, 16, 0, 32000, experts=8, top_k=2, expert_ffn=2816)
    p = moe.params()
    state = cost.model_state_bytes(moe, Layout(dp=8, ep=4, zero=0))
    assert state["weights"] == pytest.approx(2 * (p["dense"] + p["experts"] / 4))


def test_collectives_follow_the_ring_formulas():
    a = Assumptions(link_efficiency=1.0)
    M, n, beta = 1e9, 8, 100.0  # bytes, ranks, GB/s
    assert cost.all_reduce_s(M, n, beta, a) == pytest.approx(2 * (n - 1) / n * M / (beta * 1e9))
    assert cost.all_gather_s(M, n, beta, a) == pytest.approx((n - 1) / n * M / (beta * 1e9))
    assert cost.all_to_all_s(M, n, beta, a) == pytest.approx((n - 1) / n * M / (beta * 1e9))
    assert cost.p2p_s(M, beta, a) == pytest.approx(M / (beta * 1e9))
    assert cost.all_reduce_s(M, 1, beta, a) == 0.0
    # alpha: one latency per ring step
    lat = Assumptions(link_efficiency=1.0, latency_s=1e-5)
    assert cost.all_reduce_s(M, n, beta, lat) - cost.all_reduce_s(M, n, beta, a) == pytest.approx(2 * (n - 1) * 1e-5)
