"""The HTML report in a real browser (headless Chromium): the script runs under the page's CSP,
nothing is logged to the console, a link to a source line opens its file section, and a screenshot
is kept in test-artifacts/report.png for a human to look at."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from migrator.reporters import report_data
from migrator.reporters.report import render_html
from tests.conftest import REPO
from tests.report.test_golden import FIX_RECORD, LAUNCH_DIFF, NOW, VALIDATION

CHROMIUM = next((p for p in ("/usr/bin/chromium", shutil.which("chromium") or "") if p and Path(p).exists()), None)
pytestmark = pytest.mark.skipif(
    CHROMIUM is None, reason="Debian's chromium is not installed (apt-get install -y chromium; .ci/run tries)"
)
ARTIFACTS = REPO / "test-artifacts"


def _chromium(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    cmd = [
        CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
        "--disable-background-networking", "--disable-component-update", "--disable-sync", "--no-first-run",
        "--enable-logging=stderr", "--v=0", f"--user-data-dir={tmp_path / 'chromium-profile'}", *args,
    ]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=90)


@pytest.fixture
def report_file(frozen_result, project, tmp_path) -> tuple[Path, str]:
    record = tmp_path / "record.json"
    record.write_text(json.dumps(FIX_RECORD))
    validation = tmp_path / "validation.json"
    validation.write_text(json.dumps(VALIDATION))
    data = report_data.gather(frozen_result, fix_record=record, validation=validation,
                              diffs={"launch.sh": LAUNCH_DIFF}, now=NOW)
    path = tmp_path / "report.html"
    html = render_html(data)
    path.write_text(html, encoding="utf-8")
    return path, html


def _console(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if ":CONSOLE" in line or "Uncaught" in line]


def test_report_runs_in_chromium_without_errors(report_file, tmp_path):
    path, html = report_file
    line_anchor = re.search(r'id="(L(\d+)-\d+)"', html)
    assert line_anchor
    proc = _chromium(tmp_path, "--dump-dom", f"{path.as_uri()}#{line_anchor.group(1)}")
    dom = proc.stdout
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert not _console(proc.stderr), _console(proc.stderr)
    html_tag = re.search(r"<html[^>]*>", dom).group(0)
    assert 'data-report-ready="ok"' in html_tag, f"the report script did not finish: {html_tag}"
    assert "data-report-error" not in html_tag, html_tag
    # summary numbers are in the rendered page
    sites = re.search(r'data-metric="sites">(\d+)<', html).group(1)
    assert f'data-metric="sites">{sites}<' in dom and 'data-metric="migrated">' in dom
    # the script wired the tables and opened the linked file section
    assert re.search(r'<th[^>]*tabindex="0"', dom)
    file_id = f"file-{line_anchor.group(2)}"
    assert re.search(rf'<details class="file" id="{file_id}" open', dom)


def test_screenshot_artifact(report_file, tmp_path):
    path, _ = report_file
    ARTIFACTS.mkdir(exist_ok=True)
    shot = ARTIFACTS / "report.png"
    shot.unlink(missing_ok=True)
    proc = _chromium(tmp_path, f"--screenshot={shot}", "--window-size=1280,2000", path.as_uri())
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert shot.is_file() and shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 20_000
    shutil.copy(path, ARTIFACTS / "report.html")
