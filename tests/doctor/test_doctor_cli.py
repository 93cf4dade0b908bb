"""`migrate doctor` / `migrate explain` as a user runs them, and the generated release matrix."""

from __future__ import annotations

import json
import shutil
from importlib import metadata
from pathlib import Path

import pytest

from migrator.doctor import matrix
from migrator.doctor.probe import parse_npu_smi
from tests.conftest import run_cli
from tests.doctor.conftest import FIXTURES

REPO = Path(__file__).resolve().parents[2]


def test_doctor_on_this_machine_says_no_npu_and_reads_torch(tmp_path):
    done = run_cli("doctor", "--prefix", str(tmp_path), env={"PATH": "/usr/bin:/bin"})
    assert done.returncode == 0, done.stdout + done.stderr
    assert "no NPU on this machine" in done.stdout
    assert f"torch: {metadata.version('torch')}" in done.stdout
    as_json = json.loads(run_cli("doctor", "--format", "json", "--prefix", str(tmp_path),
                                 env={"PATH": "/usr/bin:/bin"}).stdout)
    assert as_json["npu_present"] is False and as_json["problems"] == 0


def test_doctor_reads_torch_npu_metadata_without_importing_it(tmp_path):
    site = tmp_path / "site"
    (site / "torch_npu").mkdir(parents=True)
    marker = tmp_path / "imported"
    (site / "torch_npu" / "__init__.py").write_text(f"open({str(marker)!r}, 'w').close()\nraise SystemExit(99)\n")
    info = site / "torch_npu-2.5.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: torch-npu\nVersion: 2.5.1\n")
    done = run_cli("doctor", "--prefix", str(tmp_path), env={"PYTHONPATH": str(site), "PATH": "/usr/bin:/bin"})
    assert not marker.exists()
    assert done.returncode == 1, done.stdout + done.stderr  # torch 2.13 with torch-npu 2.5.1: a problem
    assert "pins torch==2.5.1" in done.stdout and "fix: pip install torch-npu==2.13.0" in done.stdout


def test_doctor_log_explains_the_codes_found(tmp_path):
    done = run_cli("doctor", "--prefix", str(tmp_path), "--log", str(FIXTURES / "ascend-train.log"),
                   env={"PATH": "/usr/bin:/bin"})
    assert done.returncode == 1
    for code in ("507015", "ERR00100", "EZ9999", "EI0002", "CPU fallback"):
        assert f": {code} " in done.stdout, done.stdout
    assert done.stdout.count(": EZ9999 ") == 1  # the log repeats it; reported once


def test_doctor_missing_log_is_a_usage_error(tmp_path):
    done = run_cli("doctor", "--log", str(tmp_path / "nope.log"))
    assert done.returncode == 2 and "nope.log" in done.stderr and "cannot read" in done.stderr


def test_explain_codes_and_unknown_code():
    done = run_cli("explain", "EI0006")
    assert done.returncode == 0 and "HCCL_CONNECT_TIMEOUT" in done.stdout and "hiascend.com" in done.stdout
    inner = run_cli("explain", "EH9999", "--format", "json")
    assert json.loads(inner.stdout)[0]["code"] == "E*9999"
    unknown = run_cli("explain", "EQ1234")
    assert unknown.returncode == 2 and "EQ1234" in unknown.stderr and "the nearest: E" in unknown.stderr


def test_parse_recorded_npu_smi_screens():
    version, devices = parse_npu_smi((FIXTURES / "npu-smi-910b2x8.txt").read_text())
    assert version == "23.0.7" and [d.npu_id for d in devices] == list(range(8))
    assert {d.name for d in devices} == {"910B2"} and {d.health for d in devices} == {"OK"}
    version, devices = parse_npu_smi((FIXTURES / "npu-smi-310b4.txt").read_text())
    assert version == "23.0.rc3" and [(d.npu_id, d.name, d.health) for d in devices] == [(0, "310B4", "Alarm")]
    assert parse_npu_smi((FIXTURES / "npu-smi-dcmi-failed.txt").read_text()) == (None, ())


def test_matrix_is_generated_from_its_sources(tmp_path):
    import subprocess
    import sys

    done = subprocess.run([sys.executable, str(REPO / "ascend_env" / "generate.py"), "--check"], capture_output=True,
                          text=True)
    assert done.returncode == 0, done.stderr
    sys.path.insert(0, str(REPO / "ascend_env"))
    try:
        import generate
    finally:
        sys.path.pop(0)
    sources = tmp_path / "sources"
    shutil.copytree(REPO / "ascend_env" / "sources", sources)
    notes = sources / generate.RELEASE_NOTES
    notes.write_text(notes.read_text(encoding="utf-8").replace("|2.9.0|Python", "|2.9.0.post9|Python", 1),
                     encoding="utf-8")
    rows = {r["torch_npu"]: r for r in generate.build(sources)["releases"]}
    assert "8.5.0" in rows["2.9.0.post9"]["cann"] and "8.5.0" not in rows["2.9.0"]["cann"]


def test_matrix_lookups():
    assert matrix.find("2.7.1.post11").torch == "2.7.1"
    assert matrix.newest_for_torch("2.13.0+cpu").torch_npu == "2.13.0"
    assert matrix.newest_for_torch("1.0.0") is None
    assert "8.0.RC3" in matrix.find("2.4.0").cann


@pytest.mark.parametrize(("code", "family", "where"), [
    ("EZ3002", "CANN", "~/ascend/log"),
    ("EI9876", "HCCL", "other ranks"),
    ("ERR01013", "torch_npu", "troubleshooting"),
    ("561002", "ACL return code", "ASCEND_LAUNCH_BLOCKING=1"),
])
def test_an_unexplained_code_says_where_to_look_with_a_source(code, family, where):
    done = run_cli("explain", code)
    assert done.returncode == 2 and f"where to look: {code} has the shape of a {family}" in done.stderr
    assert where in done.stderr and "(source: http" in done.stderr


def test_text_that_is_no_code_gets_no_hint():
    done = run_cli("explain", "hello")
    assert done.returncode == 2 and "where to look" not in done.stderr
