"""`migrate plan --calibrate RUN.json` / `--calibrate-log FILE`: measured steps fit a cluster's efficiencies,
written as calibrated figures that `plan` then uses."""

from __future__ import annotations

import datetime
import hashlib
import json
from dataclasses import replace

import pytest
from click.testing import CliRunner

from migrator.cli import main
from migrator.plan import clusters
from migrator.plan.assumptions import Assumptions
from migrator.plan.calibrate import fit
from migrator.plan.calibrate_input import CalibrationInputError, MeasuredRun, read_runs
from migrator.plan.configs import from_config
from migrator.plan.cost import Layout
from migrator.plan.estimate import Job, estimate, on_cluster
from migrator.plan.layout_spec import parse_layout
from migrator.validation.parent.perf.records import BenchConfig, SideFigures, SidePerf, StagePerf, StepTime
from tests.conftest import REPO

CONFIG = REPO / "tests" / "plan" / "data" / "qwen3-8b.json"
LAYOUT = "tp=2,dp=4,zero=1,recompute=selective,mb=1"
PYPROJECT = ('[project]\nname = "demo"  # kept\n\n[tool.migrate.clusters.a2-8x]\n'
             'hbm_GBps = {value = 1500, flag = "measured", source = "our copy test"}\n')


@pytest.fixture
def project(tmp_path, monkeypatch):
    (tmp_path / "pyproject.toml").write_text(PYPROJECT)
    monkeypatch.chdir(tmp_path)  # a config file's plan reads the profiles of the project it is run in
    return tmp_path


def _planned(*extra: str) -> dict:
    import jsonschema

    from migrator.ground.resources import schema_path

    run = CliRunner().invoke(main, ["plan", "--model", str(CONFIG), "--cluster", "a2-8x", "--layout", LAYOUT,
                                    "--global-batch", "32", "--seq", "4096", "--format", "json", *extra])
    assert run.exit_code == 0, run.output
    doc = json.loads(run.stdout)
    jsonschema.validate(doc, json.loads(schema_path("plan.schema.json").read_text()))
    return doc["clusters"][0]


def _calibrate(*args: str):
    return CliRunner().invoke(main, ["plan", "--model", str(CONFIG), *args])


def _record(step: float, **changes) -> dict:
    return {"cluster": "a2-8x", "layout": {"tp": 2, "dp": 4, "zero": 1, "recompute": "selective", "mb": 1},
            "global_batch": 32, "seq_len": 4096, "step_time_s": step, "source": "our 8-NPU run, 2025-06", **changes}


def test_a_record_1_3x_slower_calibrates_the_cluster_to_predict_it(project):
    before = _planned()["top"][0]["step_s"]
    measured = 1.3 * before
    record = project / "run.json"
    record.write_text(json.dumps(_record(measured)))
    run = _calibrate("--calibrate", str(record))
    assert run.exit_code == 0, run.output
    assert "measured" in run.output and "predicted before" in run.output and "gemm_efficiency 0.65 ->" in run.output
    after = _planned("--explain")
    assert abs(after["top"][0]["step_s"] / measured - 1) < 0.01
    figures = after["cluster"]["figures"]
    digest = hashlib.sha256(record.read_bytes()).hexdigest()
    for key in ("gemm_efficiency", "attention_efficiency"):
        assert figures[key]["flag"] == "calibrated" and figures[key]["value"] < Assumptions().__getattribute__(key)
        assert "run.json" in figures[key]["source"] and digest[:16] in figures[key]["source"]
        assert datetime.date.today().isoformat() in figures[key]["source"]
    assert figures["hbm_GBps"] == {"value": 1500, "flag": "measured", "source": "our copy test"}  # kept
    assert any("predicted before" in line for line in after["cluster"]["calibration"])
    text = (project / "pyproject.toml").read_text()
    assert text.startswith('[project]\nname = "demo"  # kept\n')
    explain = "\n".join(_planned_text("--explain"))
    assert "calibration (its efficiencies replace" in explain and "predicted before" in explain
    assert "figures calibrated (not first-party): gemm_efficiency, attention_efficiency" in explain


def _planned_text(*extra: str) -> list[str]:
    run = CliRunner().invoke(main, ["plan", "--model", str(CONFIG), "--cluster", "a2-8x", "--layout", LAYOUT,
                                    "--global-batch", "32", "--seq", "4096", *extra])
    return run.output.splitlines()


def test_calibrating_again_replaces_the_calibration_only(project):
    before = _planned()["top"][0]["step_s"]
    for factor in (1.3, 1.6):
        (project / "run.json").write_text(json.dumps(_record(factor * before)))
        assert _calibrate("--calibrate", str(project / "run.json")).exit_code == 0
    text = (project / "pyproject.toml").read_text()
    assert text.count("[tool.migrate.clusters.a2-8x]") == 1 and text.count("[tool.migrate.clusters.a2-8x.calibration]") == 1
    assert abs(_planned()["top"][0]["step_s"] / (1.6 * before) - 1) < 0.01


def test_a_megatron_log_calibrates_on_its_median_after_warm_up(project):
    before = _planned()["top"][0]["step_s"]
    steps_ms = [1e3 * before * f for f in (1.2, 1.25, 1.3)]
    lines = [f" iteration {10 * (i + 1)}/ 100 | consumed samples: {320 * (i + 1)} | elapsed time per iteration (ms): "
             f"{ms:.1f} | learning rate: 3.0E-04 |" for i, ms in enumerate([50_000.0, *steps_ms])]
    log = project / "train.log"
    log.write_text("\n".join(["building model ...", *lines, "done"]) + "\n")
    run = _calibrate("--cluster", "a2-8x", "--calibrate-log", str(log), "--layout", LAYOUT,
                     "--global-batch", "32", "--seq", "4096")
    assert run.exit_code == 0, run.output
    assert "3 log lines after 1 warm-up" in run.output
    assert abs(_planned()["top"][0]["step_s"] / (1.25 * before) - 1) < 0.01


def test_a_log_needs_its_layout_and_matching_lines(project):
    log = project / "train.log"
    log.write_text("loss 2.3\n")
    run = _calibrate("--cluster", "a2-8x", "--calibrate-log", str(log))
    assert run.exit_code == 2 and "--layout" in run.output
    run = _calibrate("--cluster", "a2-8x", "--calibrate-log", str(log), "--layout", LAYOUT, "--global-batch", "32",
                     "--seq", "4096")
    assert run.exit_code == 2 and str(log) in run.output and "elapsed time per iteration (ms)" in run.output


def test_a_run_faster_than_the_peak_figures_is_refused_naming_the_file(project):
    record = project / "fast.json"
    record.write_text(json.dumps(_record(1e-3)))
    run = _calibrate("--calibrate", str(record))
    assert run.exit_code == 2
    assert str(record) in run.output and "faster than 'a2-8x' allows at its peak figures" in run.output
    assert (project / "pyproject.toml").read_text() == PYPROJECT  # nothing written


@pytest.mark.parametrize("change, field", [
    ({"step_time_s": "1.2"}, "$.step_time_s"),
    ({"step_time_s": -1}, "$.step_time_s"),
    ({"global_batch": 32.5}, "$.global_batch"),
    ({"step_time": 1.2}, "$.step_time: unknown field"),
    ({"layout": {"tp": 2, "dq": 4}}, "$.layout"),
    ({"layout": {"tp": [2]}}, "$.layout.tp"),
    ({"dtype": "int4"}, "$.dtype"),
    ({"model": 7}, "$.model"),
])
def test_a_malformed_record_names_the_file_and_field(project, change, field):
    record = project / "bad.json"
    record.write_text(json.dumps(_record(1.0, **change)))
    run = _calibrate("--calibrate", str(record))
    assert run.exit_code == 2 and f"{record}: {field}" in run.output, run.output
    assert (project / "pyproject.toml").read_text() == PYPROJECT


def test_a_record_missing_a_field_names_it(project):
    doc = _record(1.0)
    del doc["seq_len"]
    (project / "bad.json").write_text(json.dumps({"runs": [_record(1.0), doc]}))
    run = _calibrate("--calibrate", str(project / "bad.json"))
    assert run.exit_code == 2 and "bad.json: $.runs[1].seq_len: missing" in run.output


def test_runs_naming_two_clusters_are_refused(project):
    (project / "two.json").write_text(json.dumps([_record(1.0), _record(1.0, cluster="supernode-384")]))
    run = _calibrate("--calibrate", str(project / "two.json"))
    assert run.exit_code == 2 and "a2-8x, supernode-384" in run.output


def _truth_runs(model, cluster, truth: Assumptions) -> list[MeasuredRun]:
    """Runs timed by the model itself with known efficiencies."""
    out = []
    for spec in ("tp=8,dp=1,mb=1", "tp=1,dp=8,zero=1,mb=1", "tp=2,dp=4,zero=1,mb=2"):
        lay = parse_layout(spec)
        step = estimate(Job(model, 32, 4096, "bf16", truth), cluster.with_devices(lay.world), lay).step_s
        out.append(MeasuredRun("runs.json", "0" * 64, spec, step, lay, 32, 4096, "the model"))
    return out


def test_several_runs_fit_the_link_efficiency_too():
    model, cluster = from_config(CONFIG), clusters.load(["a2-8x"])[0]
    truth = replace(Assumptions(), gemm_efficiency=0.65 * 0.7, attention_efficiency=0.5 * 0.7, link_efficiency=0.3)
    result = fit(_truth_runs(model, cluster, truth), lambda run: model, cluster, Assumptions(), today="2025-01-02")
    assert result.after["link_efficiency"] == pytest.approx(0.3, rel=0.05)
    assert result.after["gemm_efficiency"] == pytest.approx(0.65 * 0.7, rel=0.05)
    assert all(abs(f.after_s / f.run.step_time_s - 1) < 0.01 for f in result.runs)
    assert all(abs(f.before_s / f.run.step_time_s - 1) > 0.05 for f in result.runs)


def test_one_run_of_a_single_device_keeps_the_link_efficiency():
    model, cluster = from_config(CONFIG), clusters.load(["a2-8x"])[0]
    lay = Layout(tp=1, dp=1, zero=0, recompute="full")
    run = MeasuredRun("one.json", "0" * 64, "$", 20.0, lay, 4, 4096, "test")
    result = fit([run], lambda r: model, cluster, Assumptions())
    assert "link_efficiency" not in result.after and any("link_efficiency not fitted" in n for n in result.notes)


def _bench_result(ranks: int, variant: str | None, median: float) -> dict:
    side = SidePerf(ranks=ranks, repeats=2, ok_repeats=2, figures=SideFigures(
        device="npu", device_name="Ascend910B3", dtype="bfloat16", step_time=StepTime(median_s=median, n=10),
        samples_per_step=8 * ranks, tokens_per_step=8 * ranks * 2048))
    perf = StagePerf(config=BenchConfig(steps=5, warmup=2, repeats=2, variant=variant), original=side, migrated=side)
    return {"schema_version": 1, "stages": [
        {"id": "S0", "status": "pass"},
        {"id": "S2", "status": "pass", "bench": {"seconds": 3.0, "perf": perf.to_json()}},
        {"id": "S3", "status": "pass", "bench": {"perf": StagePerf(config=BenchConfig(variant="tp"),
                                                                   migrated=side).to_json()}}]}


def test_a_validate_bench_result_gives_its_data_parallel_stage(tmp_path):
    path = tmp_path / "result.json"
    path.write_text(json.dumps(_bench_result(4, "ddp", 0.5)))
    runs = read_runs(path, from_config, parse_layout)
    assert len(runs) == 1  # S3's model-parallel layout is not in the result
    run = runs[0]
    assert (run.layout.dp, run.layout.zero, run.layout.micro_batch, run.global_batch, run.seq) == (4, 0, 8, 32, 2048)
    assert run.step_time_s == 0.5 and run.dtype == "bf16" and "Ascend910B3" in run.source and "S2" in run.where


def test_a_bench_result_without_a_step_time_names_the_field(tmp_path):
    doc = _bench_result(4, "ddp", 0.5)
    del doc["stages"][1]["bench"]["perf"]["migrated"]["step_time"]
    path = tmp_path / "result.json"
    path.write_text(json.dumps(doc))
    with pytest.raises(CalibrationInputError, match=r"stages\[1\] \(S2\)\.bench\.perf\.migrated\.step_time"):
        read_runs(path, from_config, parse_layout)


def test_strict_accepts_calibrated_figures_and_an_assumption_wins_over_them(tmp_path):
    (tmp_path / "pyproject.toml").write_text(
        "[tool.migrate.clusters.a100-dgx]\n"
        'gemm_efficiency = {value = 0.4, flag = "calibrated", source = "migrate plan --calibrate run.json"}\n')
    a100 = clusters.load(["a100-dgx"], tmp_path)[0]
    assert a100.not_strict("bf16") == [] and a100.figure("gemm_efficiency").flag == "calibrated"
    job = Job(from_config(CONFIG), 32, 4096)
    assert on_cluster(job, a100).assumptions.gemm_efficiency == 0.4
    assert on_cluster(job, a100, frozenset({"gemm_efficiency"})).assumptions.gemm_efficiency == 0.65


def test_an_efficiency_above_one_is_refused_naming_the_key(tmp_path):
    (tmp_path / "pyproject.toml").write_text("[tool.migrate.clusters.a2-8x]\nlink_efficiency = 1.5\n")
    with pytest.raises(clusters.ClusterError, match=r"pyproject.toml: cluster 'a2-8x' link_efficiency"):
        clusters.load(["a2-8x"], tmp_path)


def test_a_hand_set_efficiency_is_not_replaced(project):
    (project / "pyproject.toml").write_text(PYPROJECT + "gemm_efficiency = 0.5\n")
    (project / "run.json").write_text(json.dumps(_record(10.0)))
    run = _calibrate("--calibrate", str(project / "run.json"))
    assert run.exit_code == 2 and "gemm_efficiency is set (0.5, user)" in run.output
    assert (project / "pyproject.toml").read_text() == PYPROJECT + "gemm_efficiency = 0.5\n"


def test_a_record_may_name_its_model_config_beside_it(project):
    before = _planned()["top"][0]["step_s"]
    (project / "qwen.json").write_text(CONFIG.read_text())
    (project / "run.json").write_text(json.dumps(_record(1.3 * before, model="qwen.json")))
    run = CliRunner().invoke(main, ["plan", "--calibrate", str(project / "run.json")])  # no MODEL, no --cluster
    assert run.exit_code == 0, run.output
    assert abs(_planned()["top"][0]["step_s"] / (1.3 * before) - 1) < 0.01
    (project / "other.json").write_text(json.dumps(_record(1.0)))
    run = CliRunner().invoke(main, ["plan", "--calibrate", str(project / "other.json")])
    assert run.exit_code == 2 and "other.json: $: the run names no model" in run.output


def test_a_step_just_under_a_second_reads_as_one_second():
    from migrator.plan.search import duration

    assert duration(0.99995) == "1 s" and duration(0.9994) == "999 ms" and duration(0.0123) == "12.3 ms"
