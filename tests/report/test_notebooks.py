"""Consumers of notebook findings: their `line`/`column` count within `cell`, not lines of the JSON file.

SARIF and GitHub annotations point at the raw JSON line holding the source line (and name the cell in
the message); baseline fingerprints, report excerpts, op-coverage sites and the fix record use the cell.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import jsonschema

from migrator import api
from migrator.engine.notebook import cell_lines, raw_line
from migrator.engine.scanned_lines import SourceLines
from migrator.ground.resources import schema_path
from migrator.reporters import github, sarif
from migrator.reporters.report import build_context, render
from migrator.reporters.report_data import gather, load_fix_record
from tests.conftest import run_cli
from tests.report.test_formats import _validate_sarif

FIXTURE = Path(__file__).parents[1] / "fixtures" / "environment" / "beyond_py" / "notebook.ipynb"


def _copy(tmp_path: Path) -> Path:
    root = tmp_path / "nb"
    root.mkdir()
    shutil.copy(FIXTURE, root / "notebook.ipynb")
    return root


def _scan(root: Path):
    return api.scan([root], root=root, use_cache=False)


def _raw(root: Path) -> list[str]:
    return (root / "notebook.ipynb").read_text(encoding="utf-8").split("\n")


def test_sarif_regions_point_into_the_raw_notebook(tmp_path):
    root = _copy(tmp_path)
    proc = run_cli("scan", str(root), "--format", "sarif", "--no-cache")
    assert proc.returncode == 1, proc.stderr
    doc = json.loads(proc.stdout)
    _validate_sarif(doc)
    text = (root / "notebook.ipynb").read_text(encoding="utf-8")
    raw, cells = _raw(root), cell_lines(text)
    results = doc["runs"][0]["results"]
    assert results and all("cell" in r["properties"] for r in results)
    for r in results:
        cell = r["properties"]["cell"]
        region = r["locations"][0]["physicalLocation"]["region"]
        assert r["message"]["text"].startswith(f"cell {cell['index']}, line {cell['line']}: ")
        assert region["startLine"] == raw_line(text, cell["index"], cell["line"])
        # the region's raw text, JSON-decoded (`\"cuda\"`), is the flagged text of the cell line
        source = cells[cell["index"]][cell["line"] - 1]
        flagged = source[cell["column"] - 1 : cell["end_column"] - 1]
        line = raw[region["startLine"] - 1]
        assert json.loads('"' + line[region["startColumn"] - 1 : region["endColumn"] - 1] + '"') == flagged, r["ruleId"]
    dev010 = next(r for r in results if r["ruleId"] == "DEV010")
    assert dev010["locations"][0]["physicalLocation"]["region"]["startLine"] == 68  # `"model = ...cuda()\n",`
    # a one-string source: every cell line is on one JSON line
    dev001 = next(r for r in results if r["ruleId"] == "DEV001" and r["properties"]["cell"]["index"] == 4)
    assert dev001["locations"][0]["physicalLocation"]["region"]["startLine"] == 79


def test_sarif_without_lines_of_omits_the_notebook_region(tmp_path):
    result = _scan(_copy(tmp_path))
    doc = json.loads(sarif.render(result))
    _validate_sarif(doc)
    for r in doc["runs"][0]["results"]:
        assert "region" not in r["locations"][0]["physicalLocation"]
        assert r["message"]["text"].startswith("cell ")


def test_github_annotations_point_into_the_raw_notebook(tmp_path):
    root = _copy(tmp_path)
    result = _scan(root)
    out = github.render(result, lines_of=SourceLines(root)).splitlines()
    dev010 = next(line for line in out if "title=DEV010" in line)
    assert dev010.startswith("::warning file=notebook.ipynb,line=68,endLine=68,col=14,endColumn=39,")
    assert "::cell 3, line 6: `.cuda()`" in dev010
    assert _raw(root)[67][13:39] == "torch.nn.Linear(8, 8).cuda"  # col 14 .. endColumn 39 (inclusive)
    # through the CLI as well
    proc = run_cli("scan", str(root), "--format", "github", "--no-cache")
    assert "::warning file=notebook.ipynb,line=68,endLine=68,col=14," in proc.stdout
    # without the file text: a file-level annotation that still names the cell
    plain = next(line for line in github.render(result).splitlines() if "title=DEV010" in line)
    assert plain.startswith("::warning file=notebook.ipynb,title=DEV010 ") and "::cell 3, line 6: " in plain


def test_baseline_of_a_notebook_then_one_new_cuda_line_is_one_new_finding(tmp_path):
    root = _copy(tmp_path)
    base = root.parent / "baseline.json"
    proc = run_cli("scan", str(root), "--write-baseline", str(base), "--no-cache")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(run_cli("scan", str(root), "--baseline", str(base), "--format", "json", "--no-cache").stdout)["findings"] == []

    # one CUDA line near the top of cell 3: every later line of the cell (and of the file) moves
    path = root / "notebook.ipynb"
    data = json.loads(path.read_text(encoding="utf-8"))
    data["cells"][2]["source"].insert(2, "w = torch.empty(3).cuda()\n")
    path.write_text(json.dumps(data, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    proc = run_cli("scan", str(root), "--baseline", str(base), "--format", "json", "--no-cache", "--select", "DEV")
    new = json.loads(proc.stdout)["findings"]
    assert [(f["code"], f["cell"], f["line"]) for f in new] == [("DEV010", 3, 3)]


def test_report_excerpts_show_the_cell_source(tmp_path):
    root = _copy(tmp_path)
    data = gather(_scan(root))
    assert data.cells["notebook.ipynb"][3][5] == "model = torch.nn.Linear(8, 8).cuda()"
    ctx = build_context(data)
    [entry] = ctx["files"]
    rows = {(b["cell"], row["no"]): row for b in entry["excerpt"] for row in b["rows"]}
    assert rows[(3, 6)]["text"] == "model = torch.nn.Linear(8, 8).cuda()"
    assert any(f.code == "DEV010" for f in rows[(3, 6)]["hits"])
    assert entry["unplaced"] == []
    dev010 = next(f for f in data.result.findings if f.code == "DEV010")
    assert ctx["link"](dev010) == "L0-c3-6"
    assert 'id="L0-c3-6"' in render(data, "html")
    md = render(data, "md")
    assert "[cell 3]" in md and "> 6 | model = torch.nn.Linear(8, 8).cuda()" in md
    assert "| cell 3:6:9 |" in md


def test_op_coverage_sites_name_the_cell(tmp_path):
    coverage = _scan(_copy(tmp_path)).summary.coverage
    sites = {op.name: op.sites for op in coverage.ops}
    assert sites["torch.nn.Linear"] == ("notebook.ipynb:cell 3:6",)


def test_fix_record_edit_cell_is_documented_and_read(tmp_path):
    schema = json.loads(schema_path("fix-record.schema.json").read_text())
    assert "cell" in schema["$defs"]["edit"]["properties"]
    record = {
        "schema_version": 1,
        "files": [{"path": "notebook.ipynb", "edits": [
            {"code": "DEV010", "cell": 3, "original": {"line": 6, "column": 9}, "new": {"line": 6}},
            {"code": "DEV001", "cell": None, "original": {"line": 2}},
        ]}],
    }
    jsonschema.validate(record, schema)
    path = tmp_path / "fix-record.json"
    path.write_text(json.dumps(record))
    edits = load_fix_record(path, tmp_path).edits
    assert [(e.code, e.cell, e.line) for e in edits] == [("DEV001", None, 2), ("DEV010", 3, 6)]
    bad = {**record, "files": [{"path": "a.ipynb", "edits": [{"code": "DEV010", "cell": 0}]}]}
    assert not jsonschema.Draft202012Validator(schema).is_valid(bad)
