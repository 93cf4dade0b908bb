"""Issue 40 item 5: a layout a published run used must fit under the memory model, or be on the documented
list below with why; and the framework memory facts that made the MindSpore and DeepSeek-V3 rows fit."""

from __future__ import annotations

import pytest
import yaml

from migrator.plan import clusters, cost
from migrator.plan.assumptions import AssumptionError, parse_assume
from migrator.plan.configs import from_config
from migrator.plan.estimate import Job, layout_problems, on_cluster
from migrator.plan.layout_spec import parse_layout
from tests.conftest import REPO

RUNS = REPO / "bench" / "data" / "published_runs.yaml"

# Published layouts the model still judges too big, each with the unmodelled framework fact. It may only shrink.
STILL_NOT_FITTING = {
    "llama3-405b-8k-8192gpu": "Llama 3 paper Sec. 3.3.2: one layer fewer on the first and last stages and stage "
                              "inputs/outputs freed; a lighter *first* stage is not modelled, and vpp 4 is a guess",
    "llama3-405b-8k-16384gpu": "as llama3-405b-8k-8192gpu",
    "llama3-405b-128k-16384gpu": "as llama3-405b-8k-8192gpu",
    "mindformers-deepseek-v2": "AdamW on bf16 parameters (param_init_type bfloat16, not FP32StateAdamWeightDecay): "
                               "MindSpore's optimizer state bytes per parameter are not checked against a source",
    "bridge-gptoss-120b-bf16": "65 GB of activations at micro-batch 4 by Korthikanti's count; the recipe's "
                               "recomputation / offload settings are not in the table",
}


def _problems(bench, name: str, run: dict, folder) -> list[str]:
    """`layout_problems` for the run's published layout, in process (what `plan --layout` prints)."""
    config, cluster_name = bench._prepare(name, run, folder)
    cluster = clusters.load([cluster_name], root=folder)[0]
    pairs = run.get("assume", [])
    job = Job(from_config(config), run["global_batch"], run["seq"], run.get("dtype", "bf16"), parse_assume(pairs))
    job = on_cluster(job, cluster, frozenset(p.partition("=")[0] for p in pairs))
    layout = parse_layout(run["layout"])
    return layout_problems(job, cluster, layout, layout.world)


def test_every_published_layout_fits_or_is_on_the_documented_list(bench, tmp_path):
    runs = yaml.safe_load(RUNS.read_text())
    assert set(STILL_NOT_FITTING) <= set(runs)
    flagged = {}
    for name, run in runs.items():
        problems = _problems(bench, name, run, tmp_path)
        assert all(p.startswith("memory:") for p in problems), (name, problems)
        if problems:
            flagged[name] = problems[0]
    unexpected = {n: p for n, p in flagged.items() if n not in STILL_NOT_FITTING}
    assert not unexpected, f"published layouts judged not to fit: {unexpected}"
    fixed = set(STILL_NOT_FITTING) - set(flagged)
    assert not fixed, f"these fit now: take them off STILL_NOT_FITTING: {sorted(fixed)}"


def _model(name: str):
    return from_config(REPO / "tests" / "plan" / "data" / f"{name}.json")


def test_mindspore_optimizer_parallel_keeps_weights_as_dp_slices_and_gradients_unless_accumulated():
    model = _model("llama-3-70b")
    layout = cost.Layout(tp=8, pp=1, dp=4, zero=1)
    zero1 = cost.model_state_bytes(model, layout)
    sliced = cost.model_state_bytes(model, layout, shard_weights=True, shard_grads=True)
    assert sliced["weights"] == pytest.approx(zero1["weights"] / 4)
    assert sliced["gradients"] == pytest.approx(zero1["gradients"] / 4)
    assert sliced["optimizer"] == pytest.approx(zero1["optimizer"])
    assert parse_assume(["optimizer_shard=mindspore"]).optimizer_shard == "mindspore"
    with pytest.raises(AssumptionError, match="optimizer_shard is one of"):
        parse_assume(["optimizer_shard=zero4"])


def test_recomputed_norms_and_mla_up_projections_keep_fewer_activation_bytes_on_mla_only():
    mla, dense = _model("deepseek-v3"), _model("llama-3-70b")
    for model in (mla, dense):
        kept = cost.activation_bytes_per_layer(model, 4096, 1, 1, "selective")
        light = cost.activation_bytes_per_layer(model, 4096, 1, 1, "selective", norm_mla_recompute=True)
        assert light < kept * (1 - 1e-9)
        assert (light / kept < 0.6) == (model is mla)  # MLA's per-head Q, K, V are the big saving
    full = cost.activation_bytes_per_layer(mla, 4096, 1, 1, "full")
    assert cost.activation_bytes_per_layer(mla, 4096, 1, 1, "full", norm_mla_recompute=True) == full
