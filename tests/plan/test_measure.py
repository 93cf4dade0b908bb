"""`migrate plan --measure NAME` measures this machine in a child process and writes a profile that plan uses."""

from __future__ import annotations

import json
import sys

import pytest
from click.testing import CliRunner

from migrator.cli import main
from migrator.plan.clusters import load
from migrator.plan.measure import profile, write_profile
from tests.conftest import REPO

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

PYPROJECT = '[project]\nname = "demo"  # a comment kept\n\n[tool.migrate]\ntarget = "npu"\n\n[tool.ruff]\nline-length = 99\n'
CHILD = {"device": "CPU (2 cores, 2 processes)", "kind": "cpu", "memory_bytes": 8e9, "backend": "gloo", "world": 2,
         "versions": {"torch": "2.0"}, "gemm_tflops": {"bf16": {"256": 0.002, "512": 0.05}, "fp16": {"256": 0.001},
                                                       "fp32": {"256": 0.04}},
         "copy_GBps": 9.5, "bus_GBps": {"all_reduce": {"1 MB": 0.3, "8 MB": 0.9}, "all_gather": {"8 MB": 0.5}}}


def test_a_measurement_becomes_a_profile_of_measured_figures(tmp_path):
    (tmp_path / "pyproject.toml").write_text(PYPROJECT)
    write_profile(tmp_path, "box", profile(CHILD, today="2025-01-02"))
    text = (tmp_path / "pyproject.toml").read_text()
    assert text.startswith(PYPROJECT.split("[tool.ruff]")[0])  # the rest of the file byte for byte
    assert "[tool.ruff]\nline-length = 99\n" in text and "# a comment kept" in text
    box = load(["box"], tmp_path)[0]
    figures = dict(box.figures)
    assert {f.flag for f in figures.values()} == {"measured"}
    assert figures["peak_tflops_bf16"].value == 0.05 and figures["domain_GBps"].value == 0.9
    assert figures["hbm_GBps"].value == 9.5 and figures["hbm_GB"].value == 8.0 and figures["devices"].value == 2
    assert "2025-01-02" in figures["peak_tflops_bf16"].source and "all_gather 8 MB 0.5 GB/s" in figures["domain_GBps"].source
    meta = tomllib.loads(text)["tool"]["migrate"]["clusters"]["box"]
    assert meta["versions"] == {"torch": "2.0"} and meta["date"] == "2025-01-02" and meta["device"].startswith("CPU")


def test_measuring_again_replaces_the_profile_only(tmp_path):
    (tmp_path / "pyproject.toml").write_text(PYPROJECT)
    write_profile(tmp_path, "box", profile(CHILD, today="2025-01-02"))
    write_profile(tmp_path, "box", profile({**CHILD, "copy_GBps": 20.0}, today="2025-01-03"))
    text = (tmp_path / "pyproject.toml").read_text()
    assert text.count("[tool.migrate.clusters.box]") == 1 and load(["box"], tmp_path)[0].figure("hbm_GBps").value == 20


@pytest.mark.slow
def test_measure_on_this_machine_writes_a_profile_that_plan_uses(tmp_path, monkeypatch):
    (tmp_path / "pyproject.toml").write_text(PYPROJECT)
    run = CliRunner().invoke(main, ["plan", "--measure", "this-box", str(tmp_path)])
    assert run.exit_code == 0, run.output
    text = (tmp_path / "pyproject.toml").read_text()
    assert text.startswith(PYPROJECT.split("[tool.ruff]")[0]) and "[tool.ruff]\nline-length = 99\n" in text
    table = tomllib.loads(text)["tool"]["migrate"]["clusters"]["this-box"]
    assert table["versions"]["torch"] and table["date"] and table["backend"] in ("gloo", "nccl", "hccl")
    figures = {k: v for k, v in table.items() if isinstance(v, dict) and "flag" in v}
    assert {"peak_tflops_bf16", "peak_tflops_fp16", "peak_tflops_fp32", "hbm_GBps", "hbm_GB", "domain_GBps"} <= set(figures)
    assert all(v["flag"] == "measured" and v["value"] > 0 for v in figures.values())
    assert all(op in figures["domain_GBps"]["source"] for op in ("all_reduce", "all_gather", "reduce_scatter"))
    monkeypatch.chdir(tmp_path)  # a config file's plan reads the profiles of the project it is run in
    planned = CliRunner().invoke(main, ["plan", "--model", str(REPO / "tests" / "plan" / "data" / "gpt2.json"),
                                        "--cluster", "this-box", "--global-batch", "8", "--seq", "128", "--strict",
                                        "--format", "json"])
    doc = json.loads(planned.stdout)
    used = doc["clusters"][0]["cluster"]["figures"]
    assert doc["clusters"][0]["error"] is None and doc["clusters"][0]["top"]
    assert used["peak_tflops_bf16"] == figures["peak_tflops_bf16"]
