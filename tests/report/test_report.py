"""`migrate report`: formats, files it reads, hostile source text, size limits, errors (exit 2)."""

from __future__ import annotations

import json
import os
import re
from importlib.resources import files
from pathlib import Path

import pytest

from migrator.reporters import report_data
from migrator.reporters.report import GITHUB_COMMENT_LIMIT, render_markdown
from tests.conftest import run_cli
from tests.report.conftest import write_project
from tests.report.test_golden import FIX_RECORD, VALIDATION


def _outside_fences(md: str) -> str:
    return re.sub(r"(?ms)^(`{3,})[^\n]*\n.*?^\1\s*$", "", md)


def test_html_report_written_into_new_folders(project):
    out = project / "reports" / "deep" / "report.html"
    proc = run_cli("report", str(project), "-o", str(out), "--no-cache")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == ""
    html = out.read_text(encoding="utf-8")
    assert not list(out.parent.glob(".*.tmp"))
    assert html.startswith("<!DOCTYPE html>") and html.rstrip().endswith("</html>")
    for section in ('id="manual"', 'id="findings-table"', 'id="ops"', 'id="validation"', 'id="files"', 'id="rules"', 'id="effort"'):
        assert section in html
    assert 'data-metric="sites"' in html and "Auto-migratable" in html
    assert 'id="rule-dist005"' in html and 'href="#rule-dist005"' in html  # manual item -> rule docs
    # self-contained: nothing is loaded from anywhere
    assert not re.search(r"""<(script|img|link|iframe)[^>]+(src|href)=["']?(https?:)?//""", html)
    assert "default-src 'none'" in html
    umask = os.umask(0o022)
    os.umask(umask)
    assert out.stat().st_mode & 0o777 == 0o666 & ~umask  # shareable, not mkstemp's 0600


def test_markdown_report_is_a_pr_comment(project):
    proc = run_cli("report", str(project), "--format", "md", "--no-cache")
    assert proc.returncode == 0, proc.stderr
    md = proc.stdout
    assert len(md) < GITHUB_COMMENT_LIMIT
    assert md.startswith("## Ascend migration report")
    assert "<details><summary><code>train.py</code>" in md and "</details>" in md
    assert "| family | findings |" in md
    outside = _outside_fences(md)
    assert "<img" not in outside and "</script>" not in outside and "@someone" not in outside


def test_format_is_required_and_checked(project):
    proc = run_cli("report", str(project))
    assert proc.returncode == 2 and "-o FILE.html" in proc.stderr
    proc = run_cli("report", str(project), "-o", str(project / "r.txt"))
    assert proc.returncode == 2 and "r.txt" in proc.stderr
    assert not (project / "r.txt").exists()


def test_unwritable_output_is_a_clear_error(project):
    (project / "blocker").write_text("a file, not a folder")
    proc = run_cli("report", str(project), "-o", str(project / "blocker" / "r.html"))
    assert proc.returncode == 2 and "cannot write" in proc.stderr and "Traceback" not in proc.stderr


def test_zero_findings_is_a_friendly_valid_page(tmp_path):
    root = write_project(tmp_path / "clean", {"pyproject.toml": b"[project]\nname='c'\n", "a.py": b"import math\nprint(math.pi)\n"})
    out = tmp_path / "r.html"
    proc = run_cli("report", str(root), "-o", str(out))
    assert proc.returncode == 0, proc.stderr
    html = out.read_text()
    assert 'id="no-findings"' in html and "Nothing to migrate" in html
    assert 'data-metric="sites">0<' in html and "n/a" in html
    md = run_cli("report", str(root), "--format", "md").stdout
    assert "**No CUDA-only dependencies found**" in md and "No rule reported anything." in md


def test_hostile_source_is_text(project):
    html = run_cli("report", str(project), "--format", "html").stdout
    body = html.split("<main>", 1)[1].rsplit("<script>", 1)[0]
    assert "<img" not in body and "</script>" not in body and "<script" not in body
    assert "&lt;/script&gt;&lt;img src=x onerror=alert(1)&gt; {{ 7*7 }} {% raw %}" in body
    assert "\x1b" not in html and "\u202e" not in html
    assert "\\x1b[31mred\\x1b[0m" in body and "&lt;U+202E&gt;" in body
    assert "caf\ufffd" in body  # invalid UTF-8 shown with U+FFFD
    assert html.count("<script>") == 1


def test_fix_record_and_validation(project, tmp_path):
    (project / ".migrate").mkdir()
    (project / ".migrate" / "fix-record.json").write_text(json.dumps(FIX_RECORD))
    validation = tmp_path / "v.json"
    validation.write_text(json.dumps(VALIDATION))
    html = run_cli("report", str(project), "--format", "html", "--validation", str(validation)).stdout
    assert 'data-metric="migrated"' in html and 'id="applied-table"' in html
    assert "layers.3.mlp" in html and "st-fail" in html and "tokens_per_s" in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    md = run_cli("report", str(project), "--format", "md", "--validation", str(validation)).stdout
    assert "### Validation: **FAIL**" in md and "Applied edits: 3 by <code>migrate fix</code>" in md
    # the verdict and each stage's status sit in the summary table, as in the HTML summary cards
    summary_row = next(line for line in md.splitlines() if line.startswith("| **"))
    assert "**FAIL** (S0 pass · S1 warn · S2 fail · S3 not run)" in summary_row
    assert 'id="validation-card"' in html and 'data-metric="validation">FAIL<' in html


def test_validation_file_must_match_its_schema(project, tmp_path):
    bad = tmp_path / "validation.json"
    bad.write_text(json.dumps({"schema_version": 1, "stages": [{"id": "S9", "name": "x", "status": "pass", "worst": []}]}))
    proc = run_cli("report", str(project), "--format", "md", "--validation", str(bad))
    assert proc.returncode == 2
    assert "validation.json" in proc.stderr and "$.stages[0].id" in proc.stderr and proc.stdout == ""
    bad.write_text("{not json")
    proc = run_cli("report", str(project), "--format", "md", "--validation", str(bad))
    assert proc.returncode == 2 and "not valid JSON" in proc.stderr
    proc = run_cli("report", str(project), "--format", "md", "--validation", str(tmp_path / "missing.json"))
    assert proc.returncode == 2 and "missing.json" in proc.stderr


def test_fix_record_given_explicitly_must_be_valid_but_found_one_is_only_noted(project, tmp_path):
    broken = {"schema_version": 1, "files": [{"path": "a.py", "edits": [{"title": "no code"}]}]}
    explicit = tmp_path / "record.json"
    explicit.write_text(json.dumps(broken))
    proc = run_cli("report", str(project), "--format", "md", "--fix-record", str(explicit))
    assert proc.returncode == 2 and "record.json" in proc.stderr and "'code'" in proc.stderr
    (project / ".migrate").mkdir()
    (project / ".migrate" / "fix-record.json").write_text(json.dumps(broken))
    proc = run_cli("report", str(project), "--format", "md")
    assert proc.returncode == 0 and "fix record ignored" in proc.stdout


def test_proposed_diffs(project):
    html = run_cli("report", str(project), "--format", "html", "--diffs", "--no-cache").stdout
    assert "proposed diff" in html, re.findall(r"proposed diffs unavailable[^<]*", html)
    assert "ASCEND_RT_VISIBLE_DEVICES" in html and '<tr class="add">' in html


def test_markdown_shrinks_to_its_budget(frozen_result, project):
    data = report_data.gather(frozen_result)
    full = render_markdown(data)
    assert "not shown" not in full
    small = render_markdown(data, budget=9000)
    assert len(small) <= 9000 and "not shown" in small
    tiny = render_markdown(data, budget=2500)
    assert len(tiny) <= 2500


def test_templates_ship_in_the_package():
    folder = files("migrator.reporters").joinpath("templates")
    for name in ("report.html.j2", "report.md.j2", "file_section.md.j2", "report.css", "report.js"):
        assert folder.joinpath(name).is_file(), name


@pytest.mark.parametrize("name", ["validation.schema.json", "fix-record.schema.json", "baseline.schema.json"])
def test_schema_files_are_documented(name):
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    assert name in readme


def test_validation_without_markdown_renders(tmp_path):
    """A validation result whose `markdown` is empty still renders (it used to raise UndefinedError)."""
    import json

    from tests.conftest import run_cli

    result = {"schema_version": 1, "stages": [{"id": "S1", "name": "parity-1card", "status": "pass", "worst": []}],
              "markdown": ""}
    path = tmp_path / "validation.json"
    path.write_text(json.dumps(result))
    out = tmp_path / "r.html"
    proc = run_cli("report", "samples/gpt", "--validation", str(path), "-o", str(out), "--no-cache")
    assert proc.returncode in (0, 1), proc.stderr
    assert "parity-1card" in out.read_text()


def _op_section(tmp_path: Path, source: str, *ignore: str) -> str:
    from migrator import api
    from migrator.reporters.report import render

    (tmp_path / "train.py").write_text(source)
    data = api.report([tmp_path], root=tmp_path, use_cache=False, ignore=ignore)
    html = render(data, "html")
    start = html.index('<h2 id="ops">')  # a collapsed reference section: to its closing tag
    return html[start:html.index("</details>", start)]


def test_an_op_row_counts_every_call_site_it_does_not_list(tmp_path):
    calls = "".join(f"y{i} = torch.matmul(a, b)\n" for i in range(30))
    section = _op_section(tmp_path, "import torch\na = b = torch.ones(2, 2)\n" + calls)
    from migrator.reporters.report import SHOWN_OP_SITES

    row = next(r for r in section.split("<tr>") if "torch.matmul" in re.sub(r"<[^>]+>", "", r))  # names in parts
    assert '<td class="num">30</td>' in row
    assert row.count("train.py:") == SHOWN_OP_SITES and f"+{30 - SHOWN_OP_SITES} more" in row


def test_the_op_section_says_no_ops_were_found_or_that_the_table_was_off(tmp_path):
    assert 'id="ops-none"' in _op_section(tmp_path, "print('no torch here')\n")
    assert 'id="ops-not-available"' in _op_section(tmp_path, "import torch\ntorch.matmul\n", "OPS")


def test_the_op_table_and_the_schema_know_every_status_the_coverage_table_has():
    from migrator.catalogue.coverage import STATUSES
    from migrator.reporters.report import OP_STATUS_ORDER

    schema = json.loads(files("migrator").joinpath("ground/schema/findings.schema.json").read_text())
    assert sorted(OP_STATUS_ORDER) == sorted(STATUSES)
    assert schema["$defs"]["op_status"]["enum"] == list(STATUSES)
