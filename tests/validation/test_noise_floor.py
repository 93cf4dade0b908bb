"""R's noise floor (issue 37 item 4): the original's stochastically rounded bf16 runs floor the bf16 ratio's
denominator per tensor; and the fused-op argument check (npu_rms_norm's eps against the original module's)."""

from __future__ import annotations

import sys
import types

import pytest

torch = pytest.importorskip("torch")

from migrator.validation.child import fused_args, stochastic_rounding  # noqa: E402
from migrator.validation.parent.comparison.compare import compare_runs  # noqa: E402
from migrator.validation.parent.comparison.fused_args import fused_args_check  # noqa: E402
from migrator.validation.records import FusedNormCall  # noqa: E402
from tests.validation.test_validate_metrics import G0, _noisy, _run  # noqa: E402


def test_stochastic_rounding_picks_a_neighbour_unbiased_and_keeps_bf16_values():
    g = torch.Generator().manual_seed(0)
    x = torch.full((20000,), 1.0 + 2.0 ** -9)  # a quarter of the way from 1 to the next bf16 value (1 + 2^-7)
    rounded = stochastic_rounding.stochastic_bf16(x, g).float()
    assert set(rounded.unique().tolist()) == {1.0, 1.0 + 2.0 ** -7}
    assert float(rounded.mean()) == pytest.approx(float(x[0]), rel=2e-4)  # unbiased; round-to-nearest gives 1.0
    exact = torch.randn(1000, generator=g).to(torch.bfloat16).float()
    assert torch.equal(stochastic_rounding.stochastic_bf16(exact, g).float(), exact)
    special = torch.tensor([float("inf"), -float("inf"), 0.0, -0.0])
    assert torch.equal(stochastic_rounding.stochastic_bf16(special, g).float(), special)


def test_the_mode_rounds_new_bf16_results_only():
    a = torch.randn(64, 64, generator=torch.Generator().manual_seed(1)).to(torch.bfloat16)
    plain = a @ a
    with stochastic_rounding.mode(0):
        product, copy, view = a @ a, a.clone(), a.t()
    assert not torch.equal(product, plain)  # another rounding of the same fp32 product
    assert (product.float() - plain.float()).abs().max() <= plain.float().abs().max() * 2.0 ** -6
    assert torch.equal(copy, a) and view.data_ptr() == a.data_ptr()  # copies exact, views still views


def _reference_lucky(kind: str):
    """G, R with a lucky small error (0.5 %), T with 2 % (4x R): a false alarm without a floor."""
    key = "a.backward.0.input.0"
    kinds = {key: kind}
    return key, kinds, _run({key: G0}, kinds), _run({key: _noisy(G0, 5e-3, 2)}, kinds), _run({key: _noisy(G0, 2e-2, 3)}, kinds)


def test_a_noise_sample_larger_than_r_floors_the_ratio():
    key, kinds, G, R, T16 = _reference_lucky("backward")
    alone = compare_runs(G, R, None, T16).verdicts[0]
    assert alone.check("ratio").value == pytest.approx(4.0, rel=1e-3) and alone.status == "fail"
    noise = [_run({key: _noisy(G0, 2e-2, 4)}, kinds)]  # stochastic rounding: sqrt(2) x R's error level
    floored = compare_runs(G, R, None, T16, reference_noise=noise).verdicts[0]
    assert floored.check("ratio").value == pytest.approx(2 ** 0.5, rel=1e-3) and floored.status == "pass"
    assert floored.columns["ref_noise_floor"] == pytest.approx(2e-2 / 2 ** 0.5, rel=1e-3)


def test_a_smaller_noise_sample_leaves_the_ratio_to_r():
    key, kinds, G, R, T16 = _reference_lucky("forward_output")
    noise = [_run({key: _noisy(G0, 1e-3, 4)}, kinds)]
    (v,) = compare_runs(G, R, None, T16, reference_noise=noise).verdicts
    assert v.check("ratio").value == pytest.approx(4.0, rel=1e-3) and v.status == "fail"


def test_a_noise_sample_on_another_discrete_path_is_not_used():
    key, kinds, G, R, T16 = _reference_lucky("backward")
    index = "router.topk"
    kinds = {**kinds, index: "forward_output"}
    with_index = {key: None, index: torch.tensor([0, 2, 1])}

    def run(value, idx):
        return _run({**with_index, key: value, index: torch.tensor(idx)}, kinds)

    G, R, T16 = run(G0, [0, 2, 1]), run(R.tensors[next(iter(R.tensors))], [0, 2, 1]), run(T16.tensors[next(iter(T16.tensors))], [0, 2, 1])
    flipped = run(_noisy(G0, 2e-2, 4), [0, 1, 2])
    out = compare_runs(G, R, None, T16, reference_noise=[flipped])
    assert out.status == "fail"
    assert any("another discrete path" in n for n in out.notes)


def test_fused_args_check_names_the_module_and_both_eps():
    calls = [FusedNormCall("layers.0.norm", "npu_rms_norm", 1e-6, False),
             FusedNormCall("layers.1.norm", "npu_rms_norm", 1e-6, False)]
    row = fused_args_check({"layers.0.norm": 1e-5, "layers.1.norm": 1e-5}, calls)
    assert row is not None and row["status"] == "fail"
    assert "layers.0.norm" in row["message"] and "1e-06" in row["message"] and "epsilon=1e-05" in row["message"]
    assert "default" in row["message"]
    same = fused_args_check({"layers.0.norm": 1e-6}, calls[:1])
    assert same is not None and same["status"] == "pass"
    assert fused_args_check({"other": 1e-5}, calls) is None  # no module of the original to compare with


def test_the_probe_records_the_eps_each_fused_call_gets(monkeypatch):
    fake = types.ModuleType("torch_npu")

    def npu_rms_norm(x, gamma, epsilon=1e-6):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + epsilon) * gamma, None

    fake.npu_rms_norm = npu_rms_norm
    monkeypatch.setitem(sys.modules, "torch_npu", fake)

    class Norm(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.eps = 1e-5
            self.weight = torch.nn.Parameter(torch.ones(4))

        def forward(self, x):
            return sys.modules["torch_npu"].npu_rms_norm(x, self.weight)[0]

    model = torch.nn.Sequential(torch.nn.Linear(4, 4), Norm())
    calls: list = []
    with fused_args.fused_norm_calls(model, calls):
        model(torch.ones(2, 4))
    assert calls == [{"module": "1", "op": "npu_rms_norm", "eps": 1e-6, "given": False}]
    assert fake.npu_rms_norm is npu_rms_norm  # restored
    assert fused_args.module_eps(model) == {"1": 1e-5}
