"""The benchmark table in the result JSON, the terminal text and `migrate report --validation`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

SAMPLE = Path(__file__).with_name("bench_result_sample.json")  # `migrate validate samples/gpt --bench --stages S1,S2`


SCHEMA = Path(__file__).resolve().parents[2] / "migrator/schema/validation.schema.json"


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

    from migrator.validation.parent.benchreport import perf_rows

    s1 = next(s for s in produced["stages"] if s["id"] == "S1")
    assert s1["status"] in ("pass", "warn"), s1
    perf = s1["bench"]["perf"]
    jsonschema.validate(produced, json.loads(SCHEMA.read_text()))
    rows = {r[0]: r for r in perf_rows(perf)}
    assert rows["crash rate"][2].startswith("0 %") and rows["MFU"][2].startswith("n/a")


def test_sample_matches_schema():
    """The committed sample the report tests render stays a valid result document."""
    import jsonschema

    jsonschema.validate(json.loads(SAMPLE.read_text()), json.loads(SCHEMA.read_text()))


def test_rows_and_scaling_text():
    from migrator.validation.parent.benchreport import perf_rows, scaling_text

    doc = json.loads(SAMPLE.read_text())
    s2 = next(s for s in doc["stages"] if s["id"] == "S2")["bench"]["perf"]
    rows = {r[0]: r for r in perf_rows(s2)}
    for metric in ("step time (median)", "tokens/s", "achieved TFLOP/s", "MFU", "communication share", "crash rate"):
        assert metric in rows
    assert rows["MFU"][2].startswith("n/a")
    assert rows["crash rate"][2].startswith("0 %")
    text = scaling_text(doc["bench"]["scaling"])
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
