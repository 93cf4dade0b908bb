"""`migrate scan --format sarif | github`: schema-valid SARIF, faithful regions, escaped annotations."""

from __future__ import annotations

import json
import re
from dataclasses import replace

import jsonschema
import pytest

from migrator.engine.scanned_lines import SourceLines
from migrator.ground.model import Finding, FixInfo
from migrator.reporters import github, sarif
from tests.conftest import REPO, run_cli
from tests.report.conftest import DATA

SARIF_SCHEMA = json.loads((DATA / "sarif-schema-2.1.0.json").read_text(encoding="utf-8"))


def _validate_sarif(doc: dict) -> None:
    jsonschema.Draft4Validator.check_schema(SARIF_SCHEMA)
    errors = sorted(jsonschema.Draft4Validator(SARIF_SCHEMA).iter_errors(doc), key=lambda e: list(e.path))
    assert not errors, "\n".join(f"{list(e.path)}: {e.message}" for e in errors[:10])


def test_sarif_cli_output_is_valid_and_complete(project):
    proc = run_cli("scan", str(project), "--format", "sarif", "--no-cache", "--include-info")
    assert proc.returncode == 1, proc.stderr
    doc = json.loads(proc.stdout)
    _validate_sarif(doc)
    run = doc["runs"][0]
    assert doc["version"] == "2.1.0"
    assert run["originalUriBaseIds"]["SRCROOT"]["uri"].endswith("/demo/")
    rules = run["tool"]["driver"]["rules"]
    ids = [r["id"] for r in rules]
    assert ids == sorted(set(ids))
    for res in run["results"]:
        assert rules[res["ruleIndex"]]["id"] == res["ruleId"]
        loc = res["locations"][0]["physicalLocation"]
        assert loc["artifactLocation"]["uriBaseId"] == "SRCROOT"
        assert not loc["artifactLocation"]["uri"].startswith("/")
        assert res["level"] in ("error", "warning", "note")
        assert "migrateFingerprint/v1" in res["partialFingerprints"]
        assert "fixes" not in res  # replacements are only known to `migrate fix`
    dist = next(r for r in run["results"] if r["ruleId"] == "DIST001")
    assert dist["locations"][0]["physicalLocation"]["region"] == {"startLine": 8, "startColumn": 37, "endLine": 8, "endColumn": 43}
    assert dist["properties"]["fix"] == {"kind": "exact", "title": "Use `hccl`"}
    rule = rules[dist["ruleIndex"]]
    assert "markdown" in rule["help"] and "text" in rule["help"] and "```" not in rule["help"]["text"]
    assert rule["properties"]["docs"] == "docs/rules.md#dist001-nccl-backend"
    assert rule["helpUri"] == "docs/rules.md#dist001-nccl-backend"
    levels = {r["ruleId"]: r["level"] for r in run["results"]}
    assert levels["KERN001"] == "error" and levels["DEV015"] == "note"


def _github_anchor(heading: str) -> str:
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def test_every_sarif_rule_links_to_its_heading_and_has_a_full_description():
    from migrator.catalogue.loader import load_catalogue

    rules_md = (REPO / "docs" / "rules.md").read_text(encoding="utf-8")
    anchors = {_github_anchor(line[3:]) for line in rules_md.splitlines() if line.startswith("## ")}
    for rule in load_catalogue().rules.values():
        d = sarif.rule_descriptor(rule)
        path, anchor = d["helpUri"].split("#")
        assert path == "docs/rules.md" and anchor in anchors, d["helpUri"]
        assert d["fullDescription"]["text"].strip(), rule.code


def test_sarif_fixes_when_replacements_are_given(frozen_result, project):
    f = next(x for x in frozen_result.findings if x.code == "DIST001")
    edit = sarif.Replacement(f.path, f.line, f.column, f.end_line, f.end_column, '"hccl"')
    doc = json.loads(sarif.render(frozen_result, SourceLines(project), replacements={f: [edit]}))
    _validate_sarif(doc)
    res = next(r for r in doc["runs"][0]["results"] if r["ruleId"] == "DIST001")
    change = res["fixes"][0]["artifactChanges"][0]
    assert change["replacements"][0]["insertedContent"]["text"] == '"hccl"'
    assert change["replacements"][0]["deletedRegion"]["startColumn"] == f.column


def test_sarif_of_a_clean_scan_is_valid(project):
    proc = run_cli("scan", str(project / "pyproject.toml"), "--format", "sarif")
    doc = json.loads(proc.stdout)
    _validate_sarif(doc)
    assert doc["runs"][0]["results"] == [] and doc["runs"][0]["tool"]["driver"]["rules"] == []


def test_sarif_percent_encodes_paths(frozen_result):
    odd = replace(frozen_result.findings[0], path="dir with space/a#b%.py")
    doc = json.loads(sarif.render(replace(frozen_result, findings=(odd,))))
    uri = doc["runs"][0]["results"][0]["locations"][0]["physicalLocation"]["artifactLocation"]["uri"]
    assert uri == "dir%20with%20space/a%23b%25.py"


def _finding(**kw) -> Finding:
    base = dict(code="DEV010", name="tensor-cuda-call", family="device", severity="warning", path="a.py",
                line=3, column=5, end_line=3, end_column=13, symbol="cuda", message="`.cuda()` moves",
                fix=FixInfo("exact", "Use `.npu()`"))
    base.update(kw)
    return Finding(**base)


def test_github_annotation_format_and_escaping(frozen_result):
    f = _finding(path="we,ird:dir/100%.py", message="50% done\r\nnext: line", severity="info", fix=None)
    assert github.render(replace(frozen_result, findings=(f,))) == ""  # info notes only with include_info
    out = github.render(replace(frozen_result, findings=(f,)), include_info=True)
    assert out == (
        "::notice file=we%2Cird%3Adir/100%25.py,line=3,endLine=3,col=5,endColumn=12,title=DEV010 tensor-cuda-call"
        "::50%25 done%0D%0Anext: line%0AManual: see `migrate rule DEV010`\n"
    )
    assert github.escape_property("a:b,c%\n") == "a%3Ab%2Cc%25%0A"


def test_github_levels_and_multiline_regions(frozen_result):
    findings = (
        _finding(severity="error", end_line=5, end_column=3),
        _finding(severity="warning"),
    )
    lines = github.render(replace(frozen_result, findings=findings)).splitlines()
    assert lines[0].startswith("::error file=a.py,line=3,endLine=5,col=5,endColumn=2,")
    assert lines[1].startswith("::warning ") and "%0AFix (exact): Use `.npu()`" in lines[1]


def test_github_cli(project):
    proc = run_cli("scan", str(project), "--format", "github", "--no-cache")
    assert proc.returncode == 1
    assert all(line.startswith(("::error ", "::warning ", "::notice ")) for line in proc.stdout.splitlines())
    assert "::warning file=train.py,line=8," in proc.stdout


def _sarif_levels(*args: str) -> list[str]:
    return [r["level"] for r in json.loads(run_cli(*args).stdout)["runs"][0]["results"]]


def test_machine_formats_emit_warnings_and_errors_unless_include_info(project):
    """timm gave 1 598 info annotations: by default only work to do reaches code scanning and PRs."""
    default = _sarif_levels("scan", str(project), "--format", "sarif", "--no-cache")
    everything = _sarif_levels("scan", str(project), "--format", "sarif", "--no-cache", "--include-info")
    assert default and "note" not in default and set(default) <= {"error", "warning"}
    assert len(everything) > len(default) and "note" in everything
    github_default = run_cli("scan", str(project), "--format", "github", "--no-cache").stdout
    github_all = run_cli("scan", str(project), "--format", "github", "--no-cache", "--include-info").stdout
    assert "::notice " not in github_default and "::notice " in github_all
    assert len(github_default.splitlines()) == len(default)


def test_machine_formats_carry_route_marks(frozen_result):
    from migrator.ground.model import RouteMark

    covered = _finding(code="KERN010", severity="warning", fix=None, message="op",
                       route=RouteMark("covered", "DeepSpeed NPU", "deepspeed.ops.adam", "builder exists", "op_builder/npu"))
    gated = _finding(code="ATTN001", severity="error", fix=None, line=4, end_line=4, message="fa",
                     route=RouteMark("gated", "MindSpeed", "flash_attn", "patched", "mindspeed x.py:1", flag="--use-flash-attn"))
    result = replace(frozen_result, findings=(covered, gated))
    lines = github.render(result).splitlines()
    assert len(lines) == 1 and lines[0].startswith("::warning ") and "only with --use-flash-attn" in lines[0]
    with_notes = github.render(result, include_info=True).splitlines()
    assert with_notes[0].startswith("::notice ") and "covered by DeepSpeed NPU" in with_notes[0]
    doc = json.loads(sarif.render(result, include_info=True))
    _validate_sarif(doc)
    res = doc["runs"][0]["results"]
    assert [r["level"] for r in res] == ["note", "warning"]
    assert res[0]["properties"]["route"]["status"] == "covered" and res[1]["properties"]["route"]["flag"] == "--use-flash-attn"


@pytest.mark.parametrize("fmt", ["sarif", "github"])
def test_formats_listed_in_help(fmt):
    assert fmt in run_cli("scan", "--help").stdout
