"""What the report puts where, in both formats (issue 44 item 4): manual actions first, advice on speed in its
own section and out of the manual effort, reference material collapsed with its count, long lists cut with
"… and N more", and paths relative to the scanned root."""

from __future__ import annotations

import json
import re
from pathlib import Path

from migrator import api
from migrator.reporters import report_data
from migrator.reporters.report import MD_SITES, render_html, render_markdown
from tests.report.test_golden import FIX_RECORD, VALIDATION

# a CUDA-only capability check in many files (manual), a per-step `.item()` (PERF001, a warning) and a
# hand-written RMSNorm (FUS001): advice
MANUAL = "import torch\n\n\ndef big_enough():\n    major, _ = torch.cuda.get_device_capability()\n    return major >= 8\n"
ADVICE = (
    "import torch\n\n\ndef train(model, loader, opt):\n    losses = []\n    for x, y in loader:\n"
    "        loss = model(x, y)\n        loss.backward()\n        opt.step()\n        losses.append(loss.item())\n"
    "    return losses\n\n\ndef norm(x, eps):\n    variance = x.pow(2).mean(-1, keepdim=True)\n"
    "    return x * torch.rsqrt(variance + eps)\n"
)


def _tree(root: Path, n_manual: int, advice: bool) -> Path:
    root.mkdir()
    (root / "pyproject.toml").write_text("[project]\nname = 'x'\n")
    for i in range(n_manual):
        (root / f"caps_{i:02d}.py").write_text(MANUAL)
    if advice:
        (root / "train.py").write_text(ADVICE)
    return root


def _pages(root: Path, **gather) -> tuple[str, str, report_data.ReportData]:
    data = report_data.gather(api.scan([root], root=root, use_cache=False), **gather)
    return render_html(data), render_markdown(data), data


def test_advice_has_its_own_section_after_the_manual_actions_and_costs_no_effort(tmp_path):
    html, md, data = _pages(_tree(tmp_path / "t", 2, advice=True))
    codes = {f.code for f in data.result.findings}
    assert {"DEV004", "PERF001", "FUS001"} <= codes
    h2 = re.findall(r'<h2 id="([a-z]+)"', html)
    assert h2.index("manual") < h2.index("performance") < h2.index("findings") < h2.index("ops")
    manual = html[html.index('<h2 id="manual">'):html.index('<h2 id="performance">')]
    performance = html[html.index('<h2 id="performance">'):html.index('<h2 id="validation">')]
    assert "DEV004" in manual and "PERF001" not in manual and "FUS001" not in manual
    assert 'id="advice-perf001"' in performance and 'id="advice-fus001"' in performance
    # the manual count is the DEV004 sites only, in the card, the verdict and the Markdown heading alike
    assert 'data-metric="manual">2<' in html and "2 manual actions left" in html
    headings = [line for line in md.splitlines() if line.startswith("### ")]
    assert headings[0].startswith("### Manual actions (2,") and headings[1].startswith("### Performance on Ascend (2 findings")


def test_no_performance_section_without_advice(tmp_path):
    html, md, _ = _pages(_tree(tmp_path / "t", 1, advice=False))
    assert 'id="performance"' not in html and "Performance on Ascend" not in md


def test_reference_sections_are_collapsed_with_their_count(tmp_path):
    html, md, data = _pages(_tree(tmp_path / "t", 2, advice=True))
    n = len(data.result.findings)
    for section in ("findings", "ops", "files", "rules", "about"):
        assert f'<details class="ref" id="{section}-section"><summary><h2 id="{section}">' in html
        assert f'<details class="ref" id="{section}-section" open' not in html
    assert f'All findings <span class="muted">({n})</span>' in html
    assert f"<details><summary>All findings: {n}," in md and "<details><summary>Files: " in md
    assert "<details><summary>Op coverage on A2: " in md and "<details><summary>Rules: " in md


def test_a_long_manual_group_is_cut_in_markdown_and_folded_in_html(tmp_path):
    n = MD_SITES + 4
    html, md, _ = _pages(_tree(tmp_path / "t", n, advice=False))
    rows = [line for line in md.splitlines() if line.startswith("| `caps_")]
    assert len(rows) == MD_SITES
    assert "| … | and 4 more (every site: `migrate scan --format json`" in md
    group = html[html.index('id="manual-dev004"'):html.index("</section>", html.index('id="manual-dev004"'))]
    assert f"… and {n - 3} more sites</summary>" in group and group.count('href="#L') == n  # all there, folded


def test_paths_are_relative_to_the_scanned_root(tmp_path):
    root = _tree(tmp_path / "project", 1, advice=False)
    (root / ".migrate").mkdir()
    (root / ".migrate" / "fix-record.json").write_text(json.dumps(FIX_RECORD))
    elsewhere = tmp_path / "results" / "validation.json"
    elsewhere.parent.mkdir()
    elsewhere.write_text(json.dumps({**VALIDATION, "original": str(root), "migrated": str(tmp_path / "project-npu")}))
    html, md, _ = _pages(root, validation=elsewhere)
    for text in (html, md):
        assert str(tmp_path) not in text
    assert '<span class="nb">.migrate/</span><wbr><span class="nb">fix-record.json</span>' in html
    assert '<span class="nb">validation.json</span>' in html and '<span class="nb">project-npu</span>' in html
    assert 'Scan root</dt><dd class="mono"><span class="nb">project</span>' in html
