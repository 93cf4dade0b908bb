"""Baselines: line shifts keep old findings known; one new `.cuda()` line is exactly one finding."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema

from migrator.ground.resources import schema_path
from migrator.reporters import baseline as bl
from tests.conftest import run_cli

TRAIN = "import torch\n\nx = torch.zeros(2).cuda()\ny = torch.ones(2).cuda()\nz = torch.ones(2).cuda()\n"


def _repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    root.mkdir()
    (root / "pyproject.toml").write_text('[project]\nname = "x"\n')
    (root / "train.py").write_text(TRAIN)
    (root / "launch.sh").write_text("export CUDA_VISIBLE_DEVICES=0\n")
    return root


def _json(root: Path, *args: str) -> dict:
    proc = run_cli("scan", str(root), "--format", "json", "--no-cache", *args)
    assert proc.returncode in (0, 1), proc.stderr
    return json.loads(proc.stdout)


def test_write_then_apply_baseline(tmp_path):
    root = _repo(tmp_path)
    base = root / ".migrate-baseline.json"
    proc = run_cli("scan", str(root), "--write-baseline", str(base), "--no-cache")
    assert proc.returncode == 0 and "written" in proc.stderr and proc.stdout == ""
    data = json.loads(base.read_text())
    jsonschema.validate(data, json.loads(schema_path("baseline.schema.json").read_text()))
    total = len(data["findings"])
    assert total >= 4

    # unchanged tree: nothing new, exit 0, the summary says how many were hidden
    proc = run_cli("scan", str(root), "--baseline", str(base), "--no-cache")
    assert proc.returncode == 0, proc.stdout
    assert f"baselined: {total} known finding(s) hidden by the baseline; 0 new" in proc.stdout
    assert _json(root, "--baseline", str(base))["summary"]["baselined"] == total

    # shifting lines (blank lines above and between the flagged lines) makes nothing new
    (root / "train.py").write_text("\n\n\n" + TRAIN.replace("import torch\n", "import torch\n\n\n"))
    assert _json(root, "--baseline", str(base))["findings"] == []

    # one new `.cuda()` line is exactly one new finding, on that line
    text = (root / "train.py").read_text() + "w = torch.empty(3).cuda()\n"
    (root / "train.py").write_text(text)
    new = _json(root, "--baseline", str(base), "--select", "DEV")
    assert [(f["code"], f["line"]) for f in new["findings"]] == [("DEV010", len(text.splitlines()))]
    proc = run_cli("scan", str(root), "--baseline", str(base), "--select", "DEV", "--no-cache")
    assert proc.returncode == 1 and "DEV010" in proc.stdout


def test_identical_lines_are_counted(tmp_path):
    root = _repo(tmp_path)
    base = root / "b.json"
    run_cli("scan", str(root), "--write-baseline", str(base), "--select", "DEV")
    # a copy of an existing flagged line is new even though its fingerprint is known
    (root / "train.py").write_text(TRAIN + "y = torch.ones(2).cuda()\n")
    new = _json(root, "--baseline", str(base), "--select", "DEV")["findings"]
    assert len(new) == 1 and new[0]["code"] == "DEV010"


def test_config_baseline_key(tmp_path):
    root = _repo(tmp_path)
    run_cli("scan", str(root), "--write-baseline", str(root / "known.json"))
    (root / "pyproject.toml").write_text('[tool.migrate]\nbaseline = "known.json"\n')
    proc = run_cli("scan", "train.py", "--no-cache", cwd=root)
    assert proc.returncode == 0 and "baselined:" in proc.stdout, proc.stdout + proc.stderr


def test_bad_baselines_exit_2_naming_the_file(tmp_path):
    root = _repo(tmp_path)
    missing = run_cli("scan", str(root), "--baseline", str(root / "nope.json"))
    assert missing.returncode == 2 and "nope.json" in missing.stderr and "--write-baseline" in missing.stderr
    (root / "bad.json").write_text('{"schema_version": 1, "findings": [{"code": "DEV010"}]}')
    bad = run_cli("scan", str(root), "--baseline", str(root / "bad.json"))
    assert bad.returncode == 2 and "bad.json" in bad.stderr and "path" in bad.stderr
    assert "Traceback" not in bad.stderr
    (root / "pyproject.toml").write_text("[tool.migrate]\nbaseline = 3\n")
    conf = run_cli("scan", str(root))
    assert conf.returncode == 2 and "baseline" in conf.stderr


def test_fingerprint_ignores_whitespace_not_content():
    assert bl.fingerprint("DEV010", "cuda", "  x.cuda( )") == bl.fingerprint("DEV010", "cuda", "x.cuda( )   ")
    assert bl.fingerprint("DEV010", "cuda", "x.cuda()") != bl.fingerprint("DEV010", "cuda", "y.cuda()")
    assert bl.fingerprint("DEV010", "cuda", "x.cuda()") != bl.fingerprint("DEV011", "cuda", "x.cuda()")
    assert len(bl.fingerprint("MIG001", "", None)) == 16
