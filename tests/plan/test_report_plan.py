"""`migrate report --plan plan.json`: the plan section in the HTML and Markdown report."""

from __future__ import annotations

import json

from click.testing import CliRunner

from migrator.cli import main
from tests.conftest import REPO

CONFIG = {"num_layers": 24, "hidden_size": 2048, "num_attention_heads": 16, "vocab_size": 51200}


def _plan(tmp_path):
    config = tmp_path / "gpt.json"
    config.write_text(json.dumps(CONFIG))
    out = tmp_path / "plan.json"
    result = CliRunner().invoke(main, ["plan", "--model", str(config), "--cluster", "a100-dgx", "--devices", "16",
                                       "-o", str(out)])
    assert result.exit_code == 0, result.output
    return out, json.loads(out.read_text())


def test_report_shows_the_plan_section(tmp_path):
    plan, doc = _plan(tmp_path)
    label = doc["clusters"][0]["top"][0]["label"]
    md = CliRunner().invoke(main, ["report", str(REPO / "samples" / "gpt"), "--plan", str(plan), "--format", "md",
                                   "--no-cache"])
    assert md.exit_code == 0, md.output
    assert "### Parallel plan" in md.output and label in md.output
    html = tmp_path / "r.html"
    result = CliRunner().invoke(main, ["report", str(REPO / "samples" / "gpt"), "--plan", str(plan), "-o", str(html),
                                       "--no-cache"])
    assert result.exit_code == 0, result.output
    text = html.read_text()
    assert 'id="plan"' in text and 'href="#plan"' in text


def test_report_without_a_plan_has_no_plan_section(tmp_path):
    md = CliRunner().invoke(main, ["report", str(REPO / "samples" / "gpt"), "--format", "md", "--no-cache"])
    assert md.exit_code == 0 and "Parallel plan" not in md.output


def test_a_file_that_is_not_a_plan_is_refused_naming_it(tmp_path):
    bad = tmp_path / "plan.json"
    bad.write_text(json.dumps({"schema_version": 1}))
    result = CliRunner().invoke(main, ["report", str(REPO / "samples" / "gpt"), "--plan", str(bad), "--format", "md",
                                       "--no-cache"])
    assert result.exit_code == 2 and "plan.json" in result.output and "plan.schema.json" in result.output
