"""The benchmark table in the result JSON, the terminal text and `migrate report --validation`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

SAMPLE = Path(__file__).with_name("bench_result_sample.json")  # `migrate validate samples/gpt --bench --stages S1,S2`


SCHEMA = Path(__file__).resolve().parents[2] / "migrator/ground/schema/validation.schema.json"


@pytest.fixture(scope="module")
def produced(tmp_path_factory):
    """What `migrate validate --bench --stages S1` writes today, on a two-layer protocol tree (S2 adds
    torchrun launches; its perf block has the same shape and test_bench_measure times two ranks)."""
    pytest.importorskip("torch")
    from migrator import api
    from tests.validation.test_bench_measure import PROTOCOL

    tree = tmp_path_factory.mktemp("bench-report-tree")
    (tree / "validate.py").write_text(PROTOCOL)
    result = api.validate(str(tree), migrated=str(tree), stages=("S1",), steps=(0,),
                          bench=True, bench_steps=2, bench_warmup=1, bench_profile_steps=1, repeats=1,
                          work_dir=str(tmp_path_factory.mktemp("bench-report-work")))
    return json.loads(json.dumps(result.to_json()))


@pytest.mark.slow
def test_produced_result_matches_schema(produced):
    import jsonschema

    from migrator.validation.parent.perf.benchreport import perf_rows
    from migrator.validation.parent.perf.records import StagePerf

    s1 = next(s for s in produced["stages"] if s["id"] == "S1")
    assert s1["status"] in ("pass", "warn"), s1
    perf = s1["bench"]["perf"]
    jsonschema.validate(produced, json.loads(SCHEMA.read_text()))
    rows = {r[0]: r for r in perf_rows(StagePerf.read(perf))}
    assert rows["crash rate"][2].startswith("0 %") and rows["MFU"][2].startswith("n/a")


def test_sample_matches_schema():
    """The committed sample the report tests render stays a valid result document."""
    import jsonschema

    jsonschema.validate(json.loads(SAMPLE.read_text()), json.loads(SCHEMA.read_text()))


def test_rows_and_scaling_text():
    from migrator.validation.parent.perf.benchreport import perf_rows, scaling_text
    from migrator.validation.parent.perf.records import ScalingRow, StagePerf

    doc = json.loads(SAMPLE.read_text())
    s2 = StagePerf.read(next(s for s in doc["stages"] if s["id"] == "S2")["bench"]["perf"])
    rows = {r[0]: r for r in perf_rows(s2)}
    for metric in ("step time (median)", "tokens/s", "achieved TFLOP/s", "MFU", "communication share", "crash rate"):
        assert metric in rows
    assert rows["MFU"][2].startswith("n/a")
    assert rows["crash rate"][2].startswith("0 %")
    text = scaling_text(ScalingRow.read_rows(doc["bench"]["scaling"]))
    assert "1 card (S1)" in text and "2 ranks (S2 ddp)" in text and "efficiency" in text and "not measured" in text


def test_html_report_shows_benchmark(tmp_path):
    from migrator.cli import main

    out = tmp_path / "report.html"
    res = CliRunner().invoke(main, ["report", str(Path(__file__).resolve().parents[2] / "samples/gpt"),
                                    "--validation", str(SAMPLE), "-o", str(out), "--no-cache"])
    assert res.exit_code in (0, 1), res.output
    html = out.read_text()
    assert "S2 benchmark" in html and "Migrated/original" in html
    for text in ("tokens/s", "TFLOP/s", "MFU", "communication share", "crash rate", "n/a: CPU run",
                 "scaling (migrated)", "efficiency"):
        assert text in html, text


def _foreign_sample(tmp_path, edit):
    """The sample as another tool might write it: `edit(s2_perf)` changes the S2 benchmark in place."""
    doc = json.loads(SAMPLE.read_text())
    s2 = next(s for s in doc["stages"] if s["id"] == "S2")
    edit(s2["bench"]["perf"])
    doc["bench"]["scaling"][0]["colour"] = "green"  # an extra key in a scaling row
    path = tmp_path / "foreign.json"
    path.write_text(json.dumps(doc))
    return path


def _wrong_types(perf):
    perf["newer_tool_field"] = {"anything": 1}
    perf["migrated"]["step_time"] = "fast"          # an object expected
    perf["migrated"]["tokens_per_s"] = "many"       # a number expected
    perf["original"]["failures"] = [{"repeat": 0, "kind": "crash", "reason": 5}, "not an object"]
    perf["ratio"]["mfu"] = "1.0x"


def test_a_foreign_perf_with_extra_keys_and_wrong_types_renders_each_bad_figure_as_a_dash():
    from migrator.validation.parent.perf.benchreport import perf_rows
    from migrator.validation.parent.perf.records import StagePerf

    perf = next(s for s in json.loads(SAMPLE.read_text())["stages"] if s["id"] == "S2")["bench"]["perf"]
    clean = {r[0]: r for r in perf_rows(StagePerf.read(perf))}
    _wrong_types(perf)
    rows = {r[0]: r for r in perf_rows(StagePerf.read(perf))}
    assert rows["step time (median)"][2] == "-" and rows["step time (median)"][1] == clean["step time (median)"][1]
    assert rows["tokens/s"][2] == "-" and rows["MFU"][3] == "-"
    assert rows["achieved TFLOP/s"] == clean["achieved TFLOP/s"]  # the figures of the right kind are kept
    assert rows["crash rate"][1].startswith("0 %")  # the failures of the wrong shape are left out


@pytest.mark.parametrize("edit", [lambda perf: perf.update(newer_tool_field=[1, 2]),
                                  lambda perf: perf.update(config={"steps": "two", "variant": 7, "colour": "green"})],
                         ids=["extra-key", "config-the-schema-leaves-open"])
def test_the_report_renders_a_foreign_result_without_crashing(tmp_path, edit):
    from migrator.cli import main

    out = tmp_path / "report.html"
    res = CliRunner().invoke(main, ["report", str(Path(__file__).resolve().parents[2] / "samples/gpt"),
                                    "--validation", str(_foreign_sample(tmp_path, edit)), "-o", str(out), "--no-cache"])
    assert res.exit_code in (0, 1), res.output
    html = out.read_text()
    assert "S2 benchmark" in html and "scaling (migrated)" in html and "crash rate" in html


def test_the_report_refuses_a_figure_of_the_wrong_type_naming_the_file_and_the_field(tmp_path):
    """What the schema types is checked before rendering: a clear error (exit 2), not a traceback."""
    from migrator.cli import main

    path = _foreign_sample(tmp_path, _wrong_types)
    res = CliRunner().invoke(main, ["report", str(Path(__file__).resolve().parents[2] / "samples/gpt"),
                                    "--validation", str(path), "-o", str(tmp_path / "report.html"), "--no-cache"])
    assert res.exit_code == 2 and isinstance(res.exception, (SystemExit, type(None))), res.output
    assert str(path) in res.output and "$.stages[2].bench.perf" in res.output


def test_every_perf_field_survives_writing_then_reading():
    """The writer (fields in order) and the lenient reader agree on every field of every record."""
    from migrator.validation.parent.perf.records import (
        BenchConfig,
        RepeatFailure,
        ScalingRow,
        SideFigures,
        SidePerf,
        StagePerf,
        StepTime,
    )

    steps = StepTime(median_s=1.0, min_s=0.5, max_s=2.0, iqr_s=0.25, stdev_s=0.125, n=3)
    figures = SideFigures(device="cpu", device_name="x86", dtype="bfloat16", how="wall", label="CPU", step_time=steps,
                          samples_per_step=4, tokens_per_step=64, samples_per_s=1.5, tokens_per_s=24.0,
                          flops_per_step=10, achieved_tflops=0.5, peak_tflops=2.0, peak_source="table", mfu=0.25,
                          mfu_note="note", comm_share={"total": 0.5, "all-reduce": None}, peak_memory_bytes=7,
                          peak_memory_kind="rss")
    side = SidePerf(ranks=2, repeats=3, ok_repeats=2, crash_rate=1 / 3,
                    failures=(RepeatFailure(repeat=2, kind="hang", reason="past 12 s"),), figures=figures)
    config = BenchConfig(steps=5, warmup=2, repeats=3, profile_steps=1, timeout_s=12.0, bf16_policy="autocast",
                         variant="ddp", step="forward + backward")
    for perf in (StagePerf(config=config, original=side, migrated=side, ratio={"samples_per_s": 1.0},
                           ratio_note="migrated / original", label="CPU"),
                 StagePerf(config=config, original=SidePerf(skipped="recorded"), migrated=side),
                 StagePerf(skipped="nothing timed")):
        doc = json.loads(json.dumps(perf.to_json()))
        assert StagePerf.read(doc) == perf, doc
    rows = (ScalingRow(layout="1 card", ranks=1, throughput=2.0, efficiency=1.0, measured=True),
            ScalingRow(layout="supernode", ranks=384, note="planned"))
    assert ScalingRow.read_rows(json.loads(json.dumps([r.to_json() for r in rows]))) == rows
    assert "note" not in rows[0].to_json()
