"""The held-out published runs: every one cited with its layout and figure, and one through the bench."""

from __future__ import annotations

import importlib.util

import yaml

from migrator.plan.calibration import FITTED_TO
from migrator.plan.layout_spec import parse_layout
from tests.conftest import REPO

RUNS = REPO / "bench" / "data" / "published_runs.yaml"


def test_at_least_six_cited_runs_dense_and_moe_a100_and_h100_long_context_and_interleaved():
    runs = yaml.safe_load(RUNS.read_text())
    assert len(runs) >= 6
    for name, run in runs.items():
        assert run["source"] and run["published"]["value"] > 0, name
        parse_layout(run["layout"])  # readable by --layout
        assert "Narayanan et al. 2021" not in run["source"], f"{name}: the calibration table is not held out"
    assert "Narayanan et al. 2021" in FITTED_TO
    assert any("ep=" in r["layout"] and "ep=1," not in r["layout"] for r in runs.values())  # MoE
    assert {"a100-dgx", "h100-dgx"} <= {r["cluster"] if isinstance(r["cluster"], str) else r["cluster"]["base"]
                                        for r in runs.values()}
    assert any(r["seq"] >= 131072 for r in runs.values()) and any("vpp=" in r["layout"] for r in runs.values())


def test_a_published_run_through_the_bench_compares_the_published_and_the_searched_layout(tmp_path):
    spec = importlib.util.spec_from_file_location("plan_published", REPO / "bench" / "plan_published.py")
    assert spec and spec.loader
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    run = yaml.safe_load(RUNS.read_text())["korthikanti-175b"]
    row = bench.evaluate("korthikanti-175b", run, tmp_path)
    assert abs(row["predicted"] / row["published"] - 1) <= 0.20
    assert row["pick"] and row["faster"] is not None and not row["problems"]
