"""Words match facts (issue 18): each "small lie" a new user met, as a test."""

from __future__ import annotations

import json
import shutil
import subprocess
from dataclasses import replace
from pathlib import Path

import pytest
import yaml

from migrator import api
from migrator.ground.model import Marker
from migrator.reporters.text import summary_lines
from tests.conftest import REPO, run_cli


@pytest.fixture
def gpt(tmp_path: Path) -> Path:
    tree = tmp_path / "gpt"
    shutil.copytree(REPO / "samples" / "gpt", tree)
    (tree / "pyproject.toml").write_text("[project]\nname = 'gpt'\n")
    return tree


def test_a_dry_run_says_would_and_marks_each_numerics_fix(gpt):
    proc = run_cli("fix", str(gpt), "--diff", "--no-cache")
    assert proc.returncode == 1
    assert proc.stderr.startswith("would change ") and "would apply" in proc.stderr and "applied" not in proc.stderr
    assert "would remain" in proc.stderr
    marks = [line for line in proc.stdout.splitlines() if line.startswith("# validate this (numerics fix): ")]
    plan = api.fix([gpt], root=gpt, write=False, use_cache=False)
    numerics = [e for c in plan.plan.changes for e in c.edits if e.fix_kind == "numerics"]
    assert len(marks) == len(numerics) > 0
    if shutil.which("git"):  # the marks sit outside the hunks: the diff still applies
        subprocess.run(["git", "init", "-q"], cwd=gpt, check=True)
        check = subprocess.run(["git", "apply", "--check", "-"], cwd=gpt, input=proc.stdout, text=True, capture_output=True)
        assert check.returncode == 0, check.stderr


def test_remaining_count_equals_what_is_listed(gpt):
    proc = run_cli("fix", str(gpt), "--no-cache", "--no-record")
    head, *lines = proc.stdout.splitlines()
    remain = int(head.split("; ")[1].split(" finding")[0])
    listed = [line for line in lines if " warning: " in line or " error: " in line or " info: " in line]
    assert f"{len(listed)} listed below" in head or (len(listed) == remain and "all listed below" in head)
    folded = remain - len(listed)
    assert folded > 0 and f"{folded} info-level notes summarised" in head
    assert lines[-1].startswith(f"notes: {folded} info-level finding(s) not listed above")


def test_unattributed_markers_say_first_n_of_m(tmp_path):
    result = api.scan([REPO / "samples" / "gpt"], root=REPO / "samples" / "gpt", use_cache=False)
    markers = tuple(Marker("a.py", n, "cuda") for n in range(1, 201))
    many = replace(result, summary=replace(result.summary, unattributed_markers=2823, unattributed=markers))
    line = next(x for x in summary_lines(many) if "unattributed markers" in x)
    assert "the first 200 of 2823 listed in --format json" in line
    few = replace(result, summary=replace(result.summary, unattributed_markers=200, unattributed=markers))
    assert "all listed in --format json" in next(x for x in summary_lines(few) if "unattributed" in x)


def test_bare_ignore_suppresses_its_line_and_is_still_a_style_warning(tmp_path):
    (tmp_path / "m.py").write_text("import torch\nx = torch.zeros(2).cuda()  # migrate: ignore\ny = x.cuda()\n")
    result = api.scan([tmp_path], root=tmp_path, use_cache=False)
    assert [(f.line, f.code) for f in result.findings if f.family != "coverage"] == [(2, "MIG003"), (3, "DEV010")]
    assert result.summary.suppressed == 1
    assert "hides every finding on its line" in next(f.message for f in result.findings if f.code == "MIG003")


def test_migrate_folder_ignores_itself_and_the_record_is_relative(gpt):
    subprocess.run(["git", "init", "-q"], cwd=gpt, check=True)
    subprocess.run(["git", "add", "-A"], cwd=gpt, check=True)
    outcome = api.fix([gpt], root=gpt, use_cache=False)
    assert outcome.record is not None
    status = subprocess.run(["git", "status", "--porcelain", "--untracked-files=all"], cwd=gpt, capture_output=True,
                            text=True, check=True).stdout
    assert ".migrate" not in status
    assert (gpt / ".migrate" / ".gitignore").read_text().splitlines()[-1] == "*"
    text = (gpt / ".migrate" / "fix-record.json").read_text()
    assert str(gpt) not in text and str(gpt.resolve()) not in text
    record = json.loads(text)
    assert all(not Path(f["path"]).is_absolute() for f in record["files"])


def test_an_older_record_with_an_absolute_root_is_still_read(gpt, tmp_path):
    api.fix([gpt], root=gpt, use_cache=False)
    path = gpt / ".migrate" / "fix-record.json"
    record = json.loads(path.read_text())
    record["root"] = str(gpt)  # as records before relative paths were written
    path.write_text(json.dumps(record))
    settings, resolved = api.resolve_settings([gpt], root=gpt, use_cache=False)
    data = api.report(resolved, settings=settings)
    assert data.fix_record is not None and len(data.fix_record.edits) == sum(len(f["edits"]) for f in record["files"])


def test_ops_unknown_api_exits_1_and_aliases_resolve():
    proc = run_cli("ops", "torch.made_up_op")
    assert proc.returncode == 1 and "unknown API" in proc.stdout and "use with caution" not in proc.stdout
    proc = run_cli("ops", "F.gelu", "nn.Linear", "Tensor.add", "--format", "json")
    assert proc.returncode == 0, proc.stdout
    rows = json.loads(proc.stdout)
    assert [r["name"] for r in rows] == ["torch.nn.functional.gelu", "torch.nn.Linear", "torch.Tensor.add"]
    assert [r["query"] for r in rows] == ["F.gelu", "nn.Linear", "Tensor.add"]


def test_every_partial_op_says_which_limit():
    from migrator.catalogue.coverage import explain, iter_entries

    partial = [e.name for e in iter_entries(status="partial")]
    rows = explain(partial)
    assert rows and all(r["partial_because"] for r in rows)
    gelu = explain(["F.gelu"])[0]["partial_because"]
    assert any("approximate" in reason for reason in gelu) and any("fp64" in reason for reason in gelu)
    assert "partial    argument limits" in run_cli("ops", "F.gelu").stdout


def test_precommit_hooks_print_one_summary_and_fix_exact_only():
    hooks = {h["id"]: h for h in yaml.safe_load((REPO / ".pre-commit-hooks.yaml").read_text())}
    # serial: pre-commit runs the entry once with every file, not in parallel batches each with a summary
    assert hooks["migrate-scan"]["require_serial"] is True and hooks["migrate-fix"]["require_serial"] is True
    # the only default args: the `--` before the staged names (issue 38), so user args never drop --exact-only
    assert "--exact-only" in hooks["migrate-fix"]["entry"].split() and hooks["migrate-fix"]["args"] == ["--"]


def test_exact_only_leaves_numerics_and_numerics_opts_back_in(gpt):
    exact = run_cli("fix", str(gpt), "--check", "--exact-only", "--no-cache")
    both = run_cli("fix", str(gpt), "--check", "--exact-only", "--numerics", "--no-cache")
    assert "numerics 0 " in exact.stdout and "numerics 0 " not in both.stdout
    assert "numerics 0 " not in run_cli("fix", str(gpt), "--check", "--no-cache").stdout  # the command's default


def test_route_is_a_setting(tmp_path):
    from migrator.ground.config import ROUTES, ConfigError, load_settings
    from migrator.routes import CHOICES

    assert ROUTES == CHOICES
    (tmp_path / "pyproject.toml").write_text("[tool.migrate]\nroute = \"none\"\n")
    assert load_settings(tmp_path).route == "none"
    (tmp_path / "pyproject.toml").write_text("[tool.migrate]\nroute = \"megatron\"\n")
    with pytest.raises(ConfigError, match="route must be one of"):
        load_settings(tmp_path)
