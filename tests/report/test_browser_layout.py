"""The HTML report as a reviewer sees it: headless Chromium at 1400 px (DevTools over a pipe, see
headless.py) loads a report with a real `migrate validate` result (long tensor names, msprobe
metrics, a Markdown summary with <details>/<br>) and a foreign one, and measures the page."""

from __future__ import annotations

import json

import pytest

from migrator.reporters import report_data
from migrator.reporters.report import render_html
from migrator.validation.parent.results import StageResult, ValidationResult
from tests.report.headless import CHROMIUM, Browser
from tests.report.test_golden import NOW

pytestmark = pytest.mark.skipif(
    CHROMIUM is None, reason="Debian's chromium is not installed (apt-get install -y chromium; .ci/run tries)"
)
WIDTH = 1400
LONG = "step0/Module.blocks.0.attn.wo.Linear.forward.0.input.0.with.a.very.long.dotted.name.that.has.no.break"


def _tensor(name: str, value: float, threshold: float, status: str, metric: str = "rel_l2_fp32") -> dict:
    return {"tensor": name, "category": "forward", "metric": metric, "value": value, "threshold": threshold,
            "status": status, "module": "blocks.0.attn (Attention)",
            "msprobe": {"cosine": 0.99712, "max_abs": 0.0229, "max_rel": 7.84, "thousandth": 0.0317}}


def _validation() -> dict:
    stages = (
        StageResult("S0", "pass", summary="world 8 (rank 7); dp (DDP): 1 collectives",
                    checks=({"check": "mesh builds", "status": "pass", "message": "8 ranks (dp)"},)),
        StageResult("S1", "fail", summary="297 tensors; fp32 max rel_l2 3.07", reason="rel_l2_fp32 0.083 > 0.0001",
                    first_divergence=f"blocks.0.attn (Attention): first failing tensor {LONG}",
                    worst=tuple([_tensor(LONG + ".passing", 1e-7, 1e-4, "pass")]
                                + [_tensor(f"{LONG}.{i}", 0.09 - i * 1e-3, 1e-4, "fail") for i in range(12)]),
                    checks=({"check": "routing (exact)", "status": "pass", "metric": "mismatch_bf16", "worst": 0.0,
                             "threshold": 0.01, "worst_tensor": LONG},
                            {"check": "fp32 logic (T32 vs G, rel_l2)", "status": "fail", "metric": "rel_l2_fp32",
                             "worst": 3.07, "threshold": 1e-4, "tensors": 234, "worst_tensor": LONG}),
                    counts={"forward": {"pass": 50, "warn": 0, "fail": 86}}, bench={"seconds": 23.31}),
        StageResult("S3", "not_run", summary="no tensor/expert-parallel plan", reason="the program declares no 'tp'"),
    )
    return ValidationResult(original="/src/gpt", migrated="/tmp/gpt-migrated", stages=stages,
                            layers={"original": {"cuda_reference": "CPU references"}, "migrated": {}}).to_json()


FOREIGN = {"schema_version": 1, "stages": [{"id": "S1", "name": "parity", "status": "pass", "worst": []}],
           "markdown": "| stage | detail |\n|---|---|\n| S1 | ok<br>fine |\n\n<details><summary>more</summary>\n\nnotes\n\n</details>\n"}

# every table's right edge against the page's content box; the text of the validation section
MEASURE = """(() => {
  const main = document.querySelector('main').getBoundingClientRect();
  const over = Array.from(document.querySelectorAll('main table'))
    .filter(t => !t.closest('details.file'))  // source excerpts scroll inside their file box
    .filter(t => t.getBoundingClientRect().right > main.right + 1 || t.scrollWidth > t.clientWidth + 1)
    .map(t => (t.id || t.className || t.tagName) + ' ' + Math.round(t.getBoundingClientRect().width));
  let text = '', el = document.getElementById('validation');
  while (el && !(el !== document.getElementById('validation') && el.tagName === 'H2')) {
    text += el.textContent + '\\n'; el = el.nextElementSibling;
  }
  const card = document.querySelector('#cards [data-metric="validation"]');
  return {page: [document.documentElement.scrollWidth, document.documentElement.clientWidth], over: over,
          text: text, cards: document.getElementById('cards').textContent,
          verdict: card ? card.textContent.trim() : null, verdictTop: card ? card.getBoundingClientRect().top : null,
          firstTensor: (document.querySelector('#stage-s1 table.tensors tbody tr') || {}).textContent || ''};
})()"""


def _measure(tmp_path, validation: dict, name: str, frozen_result) -> dict:
    path = tmp_path / f"{name}.json"
    path.write_text(json.dumps(validation))
    page = tmp_path / f"{name}.html"
    page.write_text(render_html(report_data.gather(frozen_result, validation=path, now=NOW)), encoding="utf-8")
    with Browser(WIDTH, 900) as browser:
        browser.open(page.as_uri())
        assert browser.evaluate("document.documentElement.getAttribute('data-report-ready')") == "ok"
        found = browser.evaluate(MEASURE)
        assert not browser.console_errors()
    return found


def test_validation_section_renders_in_chromium(frozen_result, project, tmp_path):
    found = _measure(tmp_path, _validation(), "ours", frozen_result)
    assert found["page"][0] <= found["page"][1], f"the page scrolls sideways: {found['page']}"
    assert not found["over"], f"tables wider than the page: {found['over']}"
    for markup in ("<details", "</details>", "<summary", "<br", "&lt;", "&gt;"):
        assert markup not in found["text"], f"{markup!r} shown as text in the validation section"
    # the verdict is in the summary cards, on the first screen, with each stage's status
    assert found["verdict"] == "FAIL" and found["verdictTop"] < 900
    assert "S1 fail" in found["cards"] and "S3 not run" in found["cards"]
    # failing tensors first, with metric, value, threshold and the msprobe metrics
    first = found["firstTensor"]
    assert ".passing" not in first and "rel_l2_fp32" in first and "0.09" in first and "0.0001" in first
    assert "0.997" in first and "7.84" in found["text"]
    assert "fp32 logic" in found["text"] and "234 tensors" in found["text"]


def test_foreign_validation_markdown_shows_no_tags(frozen_result, project, tmp_path):
    found = _measure(tmp_path, FOREIGN, "foreign", frozen_result)
    assert "ok; fine" in found["text"] and "more" in found["text"] and "notes" in found["text"]
    for markup in ("<details", "</details>", "<summary", "<br"):
        assert markup not in found["text"]
    assert found["verdict"] == "PASS"


FOLD = """(() => {
  const cards = Array.from(document.querySelectorAll('#cards .card')).map(c => c.getBoundingClientRect().bottom);
  const verdict = document.getElementById('verdict');
  const route = document.getElementById('route');
  return {verdictBottom: verdict ? verdict.getBoundingClientRect().bottom : null, verdict: verdict ? verdict.textContent : '',
          cardsBottom: Math.max(...cards), routeOpen: route ? route.open : null};
})()"""


def test_verdict_and_cards_are_above_the_fold_at_1400_by_900(frozen_result, project, tmp_path):
    page = tmp_path / "fold.html"
    page.write_text(render_html(report_data.gather(frozen_result, now=NOW)), encoding="utf-8")
    with Browser(WIDTH, 900) as browser:
        browser.open(page.as_uri())
        found = browser.evaluate(FOLD)
    assert "manual action" in found["verdict"] or found["verdict"].startswith("Nothing")
    assert found["verdictBottom"] is not None and found["verdictBottom"] < 900
    assert found["cardsBottom"] < 900, f"the summary cards end at {found['cardsBottom']} px"
    assert found["routeOpen"] in (None, False)  # the route block is collapsed


def test_a_600_finding_report_stays_short_and_shows_every_row_on_demand(tmp_path):
    from migrator import api

    tree = tmp_path / "big"
    tree.mkdir()
    (tree / "pyproject.toml").write_text("")
    for i in range(30):
        body = "".join(f"x{j} = torch.zeros(2).cuda()\ntorch.cuda.synchronize()\n" for j in range(10))
        (tree / f"m{i:02d}.py").write_text("import torch\n\n" + body)
    result = api.scan([tree], root=tree, use_cache=False)
    assert len(result.findings) == 600
    page = tmp_path / "big.html"
    page.write_text(render_html(report_data.gather(result, now=NOW)), encoding="utf-8")
    rows = "document.querySelectorAll('#findings-table tbody tr').length"
    visible = "Array.from(document.querySelectorAll('#findings-table tbody tr')).filter(r => r.offsetParent).length"
    with Browser(WIDTH, 900) as browser:
        browser.open(page.as_uri())
        height = browser.evaluate("document.documentElement.scrollHeight")
        assert height < 15000, f"the 600-finding page is {height} px tall"
        assert browser.evaluate(rows) == 600 and browser.evaluate(visible) == 100
        browser.evaluate("document.querySelector('[data-unpage=\"findings-table\"]').click()")
        assert browser.evaluate(visible) == 600
        assert not browser.console_errors()
