"""`migrate plan --layout / --assume / --explain` on the command line, and the Megatron 2021 table through it."""

from __future__ import annotations

import importlib.util
import json

import pytest
from click.testing import CliRunner

from migrator.cli import main
from migrator.plan.assumptions import Assumptions
from tests.conftest import REPO

DATA = REPO / "tests" / "plan" / "data"
LLAMA_70B = str(DATA / "llama-3-70b.json")
BASE = ["plan", "--model", LLAMA_70B, "--cluster", "h100-dgx", "--devices", "64", "--global-batch", "512",
        "--seq", "8192"]
GOOD = "tp=8,pp=4,vpp=5,dp=2,cp=1,ep=1,zero=1,recompute=selective,sp=on,mb=1"


def plan(*args: str):
    return CliRunner().invoke(main, [*BASE, *args])


def test_a_given_layout_prints_the_same_breakdown_as_a_searched_plan():
    given = plan("--layout", GOOD)
    assert given.exit_code == 0, given.output
    for words in ("given. TP 8 x PP 4 x DP 2, VPP 5", "compute", "gemm", "attention", "communication exposed",
                  "tp all-gather/reduce-scatter", "(domain)", "communication overlapped", "dp gradient reduce",
                  "(scale-out)", "pipeline bubble", "schedule interleaved", "memory per device", "optimizer",
                  "activations"):
        assert words in given.output, words
    searched = json.loads(plan("--format", "json", "--top", "1").output)["clusters"][0]["top"][0]
    doc = json.loads(plan("--layout", GOOD, "--format", "json").output)["clusters"][0]
    assert doc["given_layout"] and doc["top"][0]["spec"] == GOOD
    assert set(doc["top"][0]) == set(searched)


@pytest.mark.parametrize("layout, constraint", [
    ("tp=3,pp=1,dp=21", "tp: 64 attention heads are not divisible by tp 3"),
    ("tp=8,pp=1,dp=8,zero=0,recompute=none", "memory: needs"),
    ("tp=8,pp=4,dp=4", "world size: tp x cp x pp x dp = 128, not the 64 devices"),
    ("tp=8,pp=2,dp=4,ep=2", "ep: ep 2 on a dense model"),
    ("tp=16,pp=1,dp=4", "tp: 8 KV heads are not divisible by tp 16"),
    ("tp=8,pp=8,dp=1,cp=1,vpp=20", "pp: pp x vpp = 160 is more than the 80 layers"),
])
def test_an_impossible_layout_exits_1_naming_the_constraint(layout, constraint):
    result = plan("--layout", layout)
    assert result.exit_code == 1 and constraint in result.output, result.output


@pytest.mark.parametrize("layout, words", [
    ("tp=eight", "tp takes a whole number"), ("tq=8", "unknown key 'tq'"), ("tp=8,tp=4", "tp given twice"),
    ("tp=8,recompute=some", "recompute is one of"), ("tp8", "is not KEY=VALUE"), ("zero=4", "out of range"),
])
def test_a_malformed_layout_exits_2_saying_what_is_wrong(layout, words):
    result = plan("--layout", layout)
    assert result.exit_code == 2 and words in result.output, result.output


def test_assume_changes_the_estimate_and_bad_assumptions_exit_2():
    flash = json.loads(plan("--layout", GOOD, "--format", "json").output)["clusters"][0]["top"][0]
    eager = json.loads(plan("--layout", GOOD, "--assume", "attention=eager", "--format", "json").output)
    assert eager["assumptions"]["attention"] == "eager"
    eager_est = eager["clusters"][0]["top"][0]
    # eager: the full s x s scores at GEMM efficiency, recomputed by selective recomputation
    assert eager_est["compute_parts_s"]["compute: attention"] > flash["compute_parts_s"]["compute: attention"]
    fp32 = json.loads(plan("--layout", GOOD, "--assume", "grad_dtype=fp32", "--format", "json").output)
    assert fp32["clusters"][0]["top"][0]["memory_bytes"]["gradients"] == pytest.approx(
        2 * flash["memory_bytes"]["gradients"])
    for bad, words in (("speed=3", "unknown assumption 'speed'"), ("dp_overlap=lots", "takes a number"),
                       ("link_efficiency=2", "out of range"), ("schedule=gpipe", "schedule is one of")):
        result = plan("--layout", GOOD, "--assume", bad)
        assert result.exit_code == 2 and words in result.output, result.output


def test_explain_lists_every_assumption_its_default_and_source_and_why_the_search_differs():
    result = plan("--layout", GOOD, "--assume", "dp_overlap=0", "--explain")
    assert result.exit_code == 0, result.output
    for name in Assumptions.__dataclass_fields__:
        assert f"   {name} = " in result.output, name
    assert "gemm_efficiency = 0.65: fitted: Narayanan et al. 2021" in result.output
    assert "dp_overlap = 0.0 (set; default 1.0)" in result.output
    assert "the search's pick (" in result.output and "than the given layout" in result.output


def test_the_megatron_2021_table_from_the_cli_is_within_15_percent_in_8_of_10_rows(tmp_path):
    spec = importlib.util.spec_from_file_location("plan_megatron_table", REPO / "bench" / "plan_megatron_table.py")
    assert spec and spec.loader
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    errors = bench.errors(tmp_path)
    assert len(errors) == 10
    assert sum(abs(e) <= 0.15 for e in errors) >= 8, errors
