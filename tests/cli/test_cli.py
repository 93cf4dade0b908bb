"""The CLI as a user runs it: subprocesses, exit codes, formats, explicit file lists."""

from __future__ import annotations

import json
import re
from pathlib import Path

import jsonschema
import pytest

from migrator.ground.resources import schema_path
from tests.conftest import REPO, run_cli

SCHEMA = json.loads(schema_path("findings.schema.json").read_text())


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "demo"\n')
    (tmp_path / "train.py").write_text(
        "import torch\nimport torch.distributed as dist\n"
        "dist.init_process_group(backend='nccl')\n"
        "x = torch.zeros(2).cuda()\n"
        "torch.backends.cudnn.benchmark = True\n"
    )
    (tmp_path / "clean.py").write_text("import torch\nx = torch.zeros(2)\n")
    (tmp_path / "info_only.py").write_text("import torch\ntorch.backends.cudnn.benchmark = True\n")
    return tmp_path


def test_findings_exit_1_and_name_file_line(project):
    proc = run_cli("scan", str(project), "--no-cache")
    assert proc.returncode == 1, proc.stderr
    assert "train.py:3:" in proc.stdout and "DIST001" in proc.stdout
    assert "train.py:4:" in proc.stdout and "DEV010" in proc.stdout
    assert "Summary" in proc.stdout and "by family:" in proc.stdout
    assert "\x1b[" not in proc.stdout  # no colour when piped


def test_clean_file_exits_0(project):
    proc = run_cli("scan", str(project / "clean.py"))
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_fail_on_levels(project):
    target = str(project / "info_only.py")
    assert run_cli("scan", target).returncode == 0  # info < warning (default)
    assert run_cli("scan", target, "--fail-on", "info").returncode == 1
    assert run_cli("scan", str(project), "--fail-on", "never").returncode == 0
    assert run_cli("scan", str(project), "--exit-zero").returncode == 0
    assert run_cli("scan", str(project), "--fail-on", "error").returncode == 0  # no error-level finding


def test_missing_path_exits_2_with_message(project):
    proc = run_cli("scan", str(project / "nope.py"))
    assert proc.returncode == 2
    assert "nope.py" in proc.stderr and "no such file" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_bad_config_exits_2(project):
    (project / "pyproject.toml").write_text('[tool.migrate]\nfail-on = "maybe"\n')
    proc = run_cli("scan", str(project))
    assert proc.returncode == 2 and "pyproject.toml" in proc.stderr and "fail-on" in proc.stderr


def test_unknown_select_code_exits_2(project):
    proc = run_cli("scan", str(project), "--select", "XYZ9")
    assert proc.returncode == 2 and "XYZ9" in proc.stderr


def test_json_output_matches_schema(project):
    proc = run_cli("scan", str(project), "--format", "json", "--no-cache")
    data = json.loads(proc.stdout)
    jsonschema.validate(data, SCHEMA)
    assert data["summary"]["root"] == project.resolve().as_posix()
    assert {f["path"] for f in data["findings"]} == {"train.py", "info_only.py"}
    dist = [f for f in data["findings"] if f["code"] == "DIST001"][0]
    assert dist["fix"] == {"kind": "exact", "title": "Use `hccl`"}
    assert [f["fix"] for f in data["findings"] if f["code"] == "DEV015"] == [None, None]


def test_output_file_is_written_atomically_and_dirs_created(project):
    out = project / "reports" / "nested" / "scan.json"
    proc = run_cli("scan", str(project), "--format", "json", "-o", str(out))
    assert proc.returncode == 1
    assert proc.stdout == ""
    jsonschema.validate(json.loads(out.read_text()), SCHEMA)
    assert not list(out.parent.glob(".*.tmp"))


def test_explicit_file_list_uses_root_for_relative_paths(project):
    (project / "pkg").mkdir()
    (project / "pkg" / "a.py").write_text("x.cuda()\n")
    proc = run_cli("scan", "pkg/a.py", "train.py", "--format", "json", cwd=project)
    data = json.loads(proc.stdout)
    assert {f["path"] for f in data["findings"]} == {"pkg/a.py", "train.py"}
    assert data["summary"]["files_scanned"] == 2


def test_select_and_ignore(project):
    data = json.loads(run_cli("scan", str(project), "--format", "json", "--select", "distributed").stdout)
    assert {f["code"] for f in data["findings"]} == {"DIST001"}
    data = json.loads(run_cli("scan", str(project), "--format", "json", "--ignore", "DEV,DIST").stdout)
    families = {f["family"] for f in data["findings"]}
    assert "DIST001" not in {f["code"] for f in data["findings"]} and not families & {"device", "distributed"}
    data = json.loads(run_cli("scan", str(project), "--format", "json", "--ignore", "DEV,DIST", "--ignore", "coverage").stdout)
    assert data["findings"] == []


def test_config_select_and_per_file_ignores(project):
    (project / "pyproject.toml").write_text(
        '[tool.migrate]\nignore = ["DEV015", "OPS"]\n[tool.migrate.per-file-ignores]\n"train.py" = ["DIST"]\n'
    )
    data = json.loads(run_cli("scan", str(project), "--format", "json").stdout)
    assert {(f["path"], f["code"]) for f in data["findings"]} == {("train.py", "DEV010")}


def test_cache_gives_same_result_and_no_cache_bypasses(project, tmp_path):
    env = {"MIGRATE_CACHE_DIR": str(tmp_path / "cache")}
    first = run_cli("scan", str(project), "--format", "json", env=env).stdout
    assert list((tmp_path / "cache").glob("*.pickle"))
    second = run_cli("scan", str(project), "--format", "json", env=env).stdout
    assert first == second
    (project / "train.py").write_text("x = 1\n")  # content changed: the cache must not answer
    third = json.loads(run_cli("scan", str(project), "--format", "json", env=env).stdout)
    assert {f["path"] for f in third["findings"]} == {"info_only.py"}


def test_process_pool_matches_serial(tmp_path):
    for i in range(60):  # sizes out of name order: the pool scans the largest first, the report keeps file order
        padding = "\n" * ((i * 37) % 11)
        (tmp_path / f"m{i}.py").write_text(f"import torch\n{padding}torch.cuda.set_device({i})\nx{i}.cuda()\n")
    serial = json.loads(run_cli("scan", str(tmp_path), "--format", "json", "-j", "1", "--no-cache").stdout)
    pooled = json.loads(run_cli("scan", str(tmp_path), "--format", "json", "-j", "2", "--no-cache").stdout)
    assert serial["findings"] == pooled["findings"] and len(serial["findings"]) == 120


def test_rules_and_rule(project):
    proc = run_cli("rules")
    assert proc.returncode == 0 and "DEV001" in proc.stdout and "ATTN001" in proc.stdout
    listed = json.loads(run_cli("rules", "--format", "json").stdout)
    assert {r["family"] for r in listed} >= {"device", "distributed", "amp", "apex", "attention", "kernels", "environment", "meta"}
    proc = run_cli("rule", "attn001")
    assert proc.returncode == 0
    assert "npu_fusion_attention" in proc.stdout and "### Why" in proc.stdout and "```python" in proc.stdout
    bad = run_cli("rule", "NOPE42")
    assert bad.returncode == 2 and "NOPE42" in bad.stderr


def test_version_and_module_entry():
    proc = run_cli("--version")
    assert proc.returncode == 0 and "ascend-migrate" in proc.stdout


def test_rule_names_its_yaml_entry_and_unit_module_one_hop_from_either():
    out = run_cli("rule", "DEV012").stdout
    entry = re.search(r"Defined in: `(rules/device\.yaml):(\d+)` \(`code: DEV012`, `name: cuda-device-string`\)", out)
    unit = re.search(r"unit: `(migrator/rules/device/cuda_device_string\.py)`", out)
    assert entry and unit, out[:400]
    lines = (REPO / entry.group(1)).read_text(encoding="utf-8").splitlines()
    assert lines[int(entry.group(2)) - 1].strip() == "- code: DEV012"
    assert (REPO / unit.group(1)).is_file()
    assert "unit: none (`fix: none`" in run_cli("rule", "DEV002").stdout


@pytest.mark.parametrize("args", [("--help",), ("rules",), ("rule", "DEV001"), ("rule", "--help"), ("rule", "DEV012"),
                                  ("scan", "{clean}")])
def test_light_commands_do_not_import_libcst_or_torch(project, args):
    args = tuple(a.format(clean=project / "clean.py") for a in args)
    proc = run_cli(*args, env={"PYTHONPROFILEIMPORTTIME": "1"})
    imported = {line.split("|")[-1].strip() for line in proc.stderr.splitlines() if "|" in line}
    assert not imported & {"libcst", "torch", "jinja2", "rich"}, args
    assert "click" in imported  # the probe works


def test_samples_scan_shows_every_family():
    data = json.loads(run_cli("scan", "samples", "--format", "json", "--no-cache", cwd=REPO).stdout)
    jsonschema.validate(data, SCHEMA)
    families = {fam for fam, n in data["summary"]["by_family"].items() if n}
    assert families >= {"device", "distributed", "amp", "apex", "attention", "kernels", "environment"}
