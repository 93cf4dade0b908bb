"""`migrate advise --profile DIR` (issue 42 item 4): each pre-hardware perf finding checked against a
recorded torch_npu profile (tests/fixtures/profiles, built from the documented formats: see its README)."""

from __future__ import annotations

import json
import os
import shutil
import stat
from pathlib import Path

import pytest

from migrator import api
from migrator.census.advise.model import CONFIRMED, NOT_CHECKABLE, NOT_SEEN
from migrator.census.advise.profile import read
from migrator.ground.usage_error import UsageError
from tests.conftest import run_cli

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
PROFILE = FIXTURES / "profiles" / "acceptance_ascend_pt"
PARTIAL = FIXTURES / "profiles" / "partial_ascend_pt"

TRAIN = '''import os
import torch
from torch import nn
os.environ["TASK_QUEUE_ENABLE"] = "0"


class Net(nn.Module):
    def forward(self, x):
        y = x.double().sum()
        return torch.nonzero(x > 0), y


def main(model, loader, opt):
    model = nn.SyncBatchNorm.convert_sync_batchnorm(model)
    for x in loader:
        loss = model(x)[1]
        loss.backward()
        opt.step()
        print(loss.item())
'''


@pytest.fixture
def tree(tmp_path):
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'x'\n")
    (tmp_path / "train.py").write_text(TRAIN)
    (tmp_path / "launch.sh").write_text("export ASCEND_LAUNCH_BLOCKING=1\npython train.py\n")
    return tmp_path


def _by_code(result):
    return {(c.code, c.line): c for c in result.checks}


def test_the_profile_files_are_read_in_their_documented_columns():
    facts = read(PROFILE)
    assert facts.output_dir.endswith("acceptance_ascend_pt/ASCEND_PROFILER_OUTPUT")
    assert {k.type for k in facts.aicpu_kernels} == {"Cast", "NonZero"}
    assert (facts.sync_calls, round(facts.sync_us, 1)) == (3, 425.7)
    assert [step for step, _, _ in facts.steps] == ["1", "2"]
    assert ("Cast", "AI_CPU", 2, 99.5) in facts.op_types


def test_each_finding_is_confirmed_not_seen_or_not_checkable(tree):
    result = api.advise(PROFILE, [tree], root=tree, run_advisor=False)
    checks = _by_code(result)
    assert checks[("PERF001", 19)].status == CONFIRMED  # print(loss.item()): stream syncs in trace_view
    assert "3 aclrtSynchronizeStream" in checks[("PERF001", 19)].evidence
    assert checks[("PERF003", 9)].status == CONFIRMED  # the AI_CPU Cast to DOUBLE
    assert "Cast" in checks[("PERF003", 9)].evidence
    assert checks[("PERF004", 14)].status == NOT_SEEN  # no SyncBatchNorm kernel recorded
    assert checks[("PERF006", 1)].status == NOT_SEEN  # 3 syncs for 12 kernels: under the advisor's 0.5
    assert checks[("PERF009", 4)].status == NOT_CHECKABLE  # the environment is not in a profile
    assert {c.path for c in result.checks} == {"train.py", "launch.sh"}
    assert not result.census


def test_a_profile_without_trace_view_cannot_show_host_syncs(tree):
    result = api.advise(PARTIAL, [tree], root=tree, run_advisor=False)
    checks = _by_code(result)
    assert checks[("PERF001", 19)].status == NOT_CHECKABLE
    assert "trace_view.json is not in the profile" in checks[("PERF001", 19)].evidence
    assert checks[("PERF003", 9)].status == CONFIRMED  # kernel_details.csv is there
    assert any("trace_view.json not in the profile" in n for n in result.notes)


def test_census_findings_are_checked_too(tree):
    census = {"format": 1, "program": {"target": ".", "mode": "script", "steps": 3}, "soc": "A2",
              "torch_npu_version": "2.14.0", "ops": [],
              "perf": [{"impl": "dynamic-shape", "path": "train.py", "line": 16, "message": "sizes change"}]}
    (tree / ".migrate").mkdir()
    (tree / ".migrate" / "op-trace.json").write_text(json.dumps(census))
    result = api.advise(PROFILE, [tree], root=tree, run_advisor=False)
    check = _by_code(result)[("PERF011", 16)]
    assert result.census and check.status == CONFIRMED
    assert "MatMulV2" in check.evidence and "GatherV2" in check.evidence


def test_not_a_profile_is_a_usage_error_naming_the_folder(tmp_path):
    with pytest.raises(UsageError, match=f"{tmp_path}: no ASCEND_PROFILER_OUTPUT"):
        api.advise(tmp_path, [tmp_path], root=tmp_path, run_advisor=False)


def test_a_bad_column_is_an_error_naming_the_file(tmp_path):
    out = tmp_path / "x_ascend_pt" / "ASCEND_PROFILER_OUTPUT"
    shutil.copytree(PROFILE / "ASCEND_PROFILER_OUTPUT", out)
    (out / "op_statistic.csv").write_text("Type,Count\nCast,2\n")
    with pytest.raises(UsageError, match=r"op_statistic\.csv: no column OP Type"):
        api.advise(tmp_path, [tmp_path], root=tmp_path, run_advisor=False)


def test_the_advisor_says_it_is_not_installed(tree, monkeypatch):
    monkeypatch.setenv("PATH", str(tree / "no-such-bin"))
    proc = run_cli("advise", "--profile", str(PROFILE), "--root", str(tree), str(tree))
    code, out = proc.returncode, proc.stdout
    assert code == 0, proc.stderr
    assert f"msprof-analyze is not installed: `msprof-analyze advisor all -d {PROFILE}` not run" in out
    assert "train.py:9: PERF003 confirmed:" in out


def test_the_advisor_runs_where_installed_and_its_output_is_included(tree, tmp_path_factory, monkeypatch):
    bin_dir = tmp_path_factory.mktemp("bin")
    fake = bin_dir / "msprof-analyze"
    fake.write_text('#!/bin/sh\necho "advisor called with: $*"\necho "AICPU Issues: Cast"\nexit 0\n')
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    proc = run_cli("advise", "--profile", str(PROFILE), "--root", str(tree), "--format", "json", str(tree))
    code, out = proc.returncode, proc.stdout
    assert code == 0, proc.stderr
    data = json.loads(out)
    assert data["advisor"]["installed"] and data["advisor"]["exit_code"] == 0
    assert f"advisor called with: advisor all -d {PROFILE}" in data["advisor"]["output"]
    assert data["counts"]["confirmed"] == sum(1 for c in data["checks"] if c["status"] == CONFIRMED) > 0
