"""The MoE dispatch term (a fixed time per dispatch / combine) and the one-run-per-family fits behind it."""

from __future__ import annotations

from dataclasses import replace

import pytest
import yaml

from migrator.plan import calibration
from migrator.plan.assumptions import Assumptions, parse_assume
from migrator.plan.clusters import load
from migrator.plan.compute import Device, microbatch_s
from migrator.plan.cost import Layout
from migrator.plan.estimate import Job, on_cluster
from migrator.plan.model import ModelShape
from tests.conftest import REPO

H100 = Device(989e12, 3.35e12)
MOE = ModelShape("moe", 8, 1024, 16, 16, 4096, 32000, experts=8, top_k=2, expert_ffn=2048, gated_mlp=True)
RUNS = yaml.safe_load((REPO / "bench" / "data" / "published_runs.yaml").read_text())
SYNC = "moe dispatch sync"


@pytest.mark.parametrize(("recompute", "chains"), [("none", 4), ("selective", 4), ("full", 6)])
def test_each_dispatch_and_combine_costs_the_fixed_time_forward_backward_and_recomputed(recompute, chains):
    a = Assumptions(moe_dispatch_s=1e-3)
    lay = Layout(recompute=recompute, sp=False)
    got = microbatch_s(MOE, lay, 4096, H100, a)[SYNC]
    # dispatch + combine in the forward, their two backward all-to-alls, the forward again under full recompute
    assert got == pytest.approx(MOE.layers * chains * 1e-3)
    longer = microbatch_s(MOE, replace(lay, micro_batch=4), 4096, H100, a)[SYNC]
    assert longer == pytest.approx(got)  # fixed per dispatch: a larger micro-batch shares it over more tokens
    dense = replace(MOE, experts=0, top_k=0, expert_ffn=0)
    assert microbatch_s(dense, lay, 4096, H100, a)[SYNC] == 0.0


def test_only_the_moe_layers_pay_it():
    first_dense = replace(MOE, dense_layers=2)  # DeepSeek-style: the first layers keep a dense MLP
    a = Assumptions(moe_dispatch_s=1e-3)
    got = microbatch_s(first_dense, Layout(sp=False), 4096, H100, a)[SYNC]
    assert first_dense.moe_layers == 6 and got == pytest.approx(6 * 4 * 1e-3)


def test_an_ascend_cluster_takes_the_ascend_fit_and_an_assumed_value_wins():
    a2, h100 = load(["a2-8x", "h100-dgx"])
    job = Job(MOE, 32, 4096)
    assert on_cluster(job, a2).assumptions.moe_dispatch_s == calibration.MOE_DISPATCH_S["ascend"][0]
    assert on_cluster(job, h100).assumptions.moe_dispatch_s == calibration.MOE_DISPATCH_S["nvidia"][0]
    mine = replace(job, assumptions=parse_assume(["moe_dispatch_s=0"]))
    assert on_cluster(mine, a2, frozenset({"moe_dispatch_s"})).assumptions.moe_dispatch_s == 0.0


def test_each_fitted_constant_comes_from_exactly_one_run_marked_fit():
    fits = [(name, run["fit"]["key"], run["cluster"]) for name, run in RUNS.items() if "fit" in run]
    for family, (value, source) in calibration.MOE_DISPATCH_S.items():
        named = [name for name, key, _ in fits if key == "moe_dispatch_s" and source.startswith(name)]
        assert len(named) == 1 and value > 0, family  # one run, and it is the one the constant cites
    assert sorted(c for _, key, c in fits if key == "moe_dispatch_s") == ["a2-8x", "h100-dgx"]  # one per family
    assert [c for _, key, c in fits if key == "peak_tflops_bf16"] == ["a2-8x"]
    assert "fitted to one published run" in calibration.DERIVED_FIGURES["a2-8x"]["peak_tflops_bf16"][1]


@pytest.mark.parametrize("name", [n for n, r in RUNS.items() if "fit" in r])
def test_the_shipped_constants_reproduce_the_run_they_were_fitted_to(name, bench, tmp_path):
    row = bench.evaluate(name, RUNS[name], tmp_path, search=False)  # fails when the model changes without a refit
    assert row["predicted"] == pytest.approx(row["published"], rel=0.01)
