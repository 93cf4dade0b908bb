"""`migrate scan --format junit | gitlab | csv` (issue 44 item 5): the shapes the CIs and spreadsheets read."""

from __future__ import annotations

import csv
import io
import json
import xml.etree.ElementTree as ET
from collections import Counter
from pathlib import Path

import jsonschema
import pytest

from tests.conftest import run_cli

# GitLab's Code Quality report: the fields GitLab reads (docs.gitlab.com/ci/testing/code_quality, "Code Quality report format")
CODE_QUALITY = {
    "type": "array",
    "items": {
        "type": "object",
        "required": ["description", "check_name", "fingerprint", "severity", "location"],
        "properties": {
            "description": {"type": "string", "minLength": 1},
            "check_name": {"type": "string", "minLength": 1},
            "fingerprint": {"type": "string", "pattern": "^[0-9a-f]{64}$"},
            "severity": {"enum": ["info", "minor", "major", "critical", "blocker"]},
            "location": {
                "type": "object",
                "required": ["path", "lines"],
                "properties": {
                    "path": {"type": "string"},
                    "lines": {"type": "object", "required": ["begin"], "properties": {"begin": {"type": "integer", "minimum": 1}}},
                },
            },
        },
    },
}


def _scan(project, fmt: str, *extra: str) -> str:
    proc = run_cli("scan", str(project), "--format", fmt, "--no-cache", *extra)
    assert proc.returncode == 1, proc.stderr
    return proc.stdout


def _findings(project, *extra: str) -> list[dict]:
    return json.loads(_scan(project, "json", *extra))["findings"]


def test_junit_one_suite_per_file_one_failing_case_per_finding(project):
    root = ET.fromstring(_scan(project, "junit", "--include-info"))
    findings = _findings(project)
    per_file = Counter(f["path"] for f in findings)
    assert root.tag == "testsuites" and int(root.get("tests")) == int(root.get("failures")) == len(findings)
    suites = root.findall("testsuite")
    assert sorted(s.get("name") for s in suites) == sorted(per_file)
    for suite in suites:
        cases = suite.findall("testcase")
        assert len(cases) == int(suite.get("tests")) == int(suite.get("failures")) == per_file[suite.get("name")]
        for case in cases:
            failure = case.find("failure")
            assert failure is not None and failure.get("type") in case.get("name") and failure.get("message")
            assert case.get("file") == suite.get("name") and int(case.get("line")) >= 1
    codes = sorted(c.find("failure").get("type") for c in root.iter("testcase"))
    assert codes == sorted(f["code"] for f in findings)


def test_junit_validates_against_the_report_format(project):
    """Against the element and attribute set CI servers read (tests/report/data/junit.xsd), info included, so
    every kind of finding and odd text (backticks, quotes, `<`) passes through the XML escaping."""
    xmlschema = pytest.importorskip("xmlschema", reason="the test extra installs xmlschema")
    schema = xmlschema.XMLSchema(str(Path(__file__).parent / "data" / "junit.xsd"))
    schema.validate(_scan(project, "junit", "--include-info"))
    with pytest.raises(xmlschema.XMLSchemaValidationError):  # the schema is strict enough to notice
        schema.validate('<testsuites><testsuite name="a" tests="-1"/></testsuites>')


def test_junit_leaves_info_out_by_default(project):
    root = ET.fromstring(_scan(project, "junit"))
    emitted = [f for f in _findings(project) if f["severity"] != "info"]
    assert int(root.get("tests")) == len(emitted) < len(_findings(project))


def test_gitlab_code_quality_validates_and_fingerprints_survive_moved_lines(project):
    issues = json.loads(_scan(project, "gitlab"))
    jsonschema.validate(issues, CODE_QUALITY)
    assert len({i["fingerprint"] for i in issues}) == len(issues) > 0
    dist = next(i for i in issues if i["check_name"] == "DIST001")
    assert dist["location"] == {"path": "train.py", "lines": {"begin": 8}} and dist["severity"] == "major"
    kern = next(i for i in issues if i["check_name"] == "KERN001")
    assert kern["severity"] == "critical"
    train = project / "train.py"
    train.write_text("# a new first line\n" + train.read_text())
    moved = json.loads(_scan(project, "gitlab"))
    moved_dist = next(i for i in moved if i["check_name"] == "DIST001")
    assert moved_dist["location"]["lines"]["begin"] == 9 and moved_dist["fingerprint"] == dist["fingerprint"]
    assert {i["fingerprint"] for i in moved} == {i["fingerprint"] for i in issues}


def test_csv_round_trips_every_finding(project):
    rows = list(csv.DictReader(io.StringIO(_scan(project, "csv"), newline="")))
    findings = _findings(project, "--include-info")
    assert len(rows) == len(findings) > 0
    by_key = {(r["path"], int(r["line"]), int(r["column"]), r["code"]): r for r in rows}
    for f in findings:
        row = by_key[(f["path"], f["line"], f["column"], f["code"])]
        assert row["message"] == f["message"] and row["severity"] == f["severity"] and row["name"] == f["name"]
        assert row["fix_kind"] == (f["fix"]["kind"] if f.get("fix") else "manual")


def test_csv_defuses_formula_cells(tmp_path):
    (tmp_path / "=cmd.py").write_text("import torch\nx = torch.zeros(2).cuda()\n")
    rows = list(csv.DictReader(io.StringIO(_scan(tmp_path, "csv"), newline="")))
    assert [r["path"] for r in rows if r["code"] == "DEV010"] == ["'=cmd.py"]
