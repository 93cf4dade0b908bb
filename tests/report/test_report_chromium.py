"""The report sized for reading, measured in headless Chromium at 1280x900 (issue 44 item 4): with every
section in its default state the page of a 228-file repository stays under 15 000 px, the verdict, the
cards and the first manual action are on the first screen, advice on speed comes after the manual actions
and before the reference sections, no path part, `file:line` or rule code is broken across lines, and no
absolute path of this machine is in the page or the Markdown. The page is measured on a copy with a
measuring script appended (tests/report/dom_metrics.py); the report itself carries no test hook."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from migrator import api
from migrator.reporters import report_data
from migrator.reporters.report import render_html, render_markdown
from tests.conftest import REPO
from tests.report.big_repo import N_FILES, write_big_repo
from tests.report.dom_metrics import CHROMIUM, HEIGHT, WIDTH, measure, png_pixels, screenshot

pytestmark = pytest.mark.skipif(
    CHROMIUM is None, reason="Debian's chromium is not installed (apt-get install -y chromium; .ci/run installs it)"
)
MAX_PAGE_PX = 15_000


def _report(tree: Path, out: Path) -> tuple[Path, str, str]:
    result = api.scan([tree], root=tree, use_cache=False)
    data = report_data.gather(result)
    page = out / f"{tree.name}.html"
    html = render_html(data)
    page.write_text(html, encoding="utf-8")
    return page, html, render_markdown(data)


@pytest.fixture(scope="module")
def big(tmp_path_factory) -> tuple[Path, Path, str, str]:
    work = tmp_path_factory.mktemp("big-report")
    tree = write_big_repo(work / "bigrepo")
    assert sum(1 for _ in tree.rglob("*.py")) == N_FILES == 228
    return (tree, *_report(tree, work))


@pytest.fixture(scope="module")
def sample(tmp_path_factory) -> tuple[Path, Path, str, str]:
    work = tmp_path_factory.mktemp("sample-report")
    tree = work / "gpt"
    shutil.copytree(REPO / "samples" / "gpt", tree)
    return (tree, *_report(tree, work))


@pytest.fixture(scope="module")
def sample_found(sample, tmp_path_factory) -> dict:
    """The sample's report measured in Chromium once (a launch costs seconds), whichever tests read it."""
    return measure(sample[1], tmp_path_factory.mktemp("measure-sample"))


@pytest.fixture(scope="module")
def big_found(big, tmp_path_factory) -> dict:
    return measure(big[1], tmp_path_factory.mktemp("measure-big"))


def _first_screen(found: dict) -> None:
    assert found["ready"] == "ok" and not found["error"], found["error"]
    assert found["scrollWidth"] <= found["clientWidth"], "the page scrolls sideways"
    for what in ("verdict", "cards", "firstAction"):
        assert found[what] is not None, f"no {what} on the page"
        assert found[what]["bottom"] <= HEIGHT, f"the {what} ends at {found[what]['bottom']:.0f} px, below the first screen"
    assert found["laidOutParts"] > 0 and not found["split"], f"broken across lines: {found['split'][:5]}"


def _order(found: dict) -> None:
    """Manual actions, then advice on speed, then the reference sections."""
    sections = found["sections"]
    assert sections[0] == "manual" and sections[1] == "performance", sections
    for reference in ("findings", "ops", "files", "rules"):
        assert sections.index(reference) > sections.index("performance"), sections


@pytest.mark.parametrize("which", ["sample", "big"])
def test_the_first_screen_holds_the_verdict_cards_and_first_manual_action(which, request):
    found = request.getfixturevalue(f"{which}_found")
    _first_screen(found)
    _order(found)
    assert found["firstActionText"] and found["performance"]["top"] > found["firstAction"]["bottom"]


def test_a_228_file_repository_reads_in_under_15000_px(big, big_found):
    tree, page, html, md = big
    found = big_found
    assert found["scrollHeight"] < MAX_PAGE_PX, f"the page is {found['scrollHeight']} px tall"
    # collapsed is not missing: every finding is in the page, each reference section says how many it holds
    result_findings = html.count('<tr data-severity="')
    assert result_findings > 500
    assert f'<h2 id="findings">All findings <span class="muted">({result_findings})</span>' in html
    assert '<details class="ref" id="ops-section">' in html and '<details class="ref" id="rules-section">' in html


def test_no_absolute_path_of_this_machine_is_shown(big, sample):
    for tree, _, html, md in (big, sample):
        for text in (html, md):
            for absolute in {str(tree), str(tree.resolve()), str(tree.parent), str(REPO)}:
                assert absolute not in text, f"{absolute} is in the report"


def test_a_first_screen_screenshot_is_a_real_picture(big, tmp_path):
    _, page, _, _ = big
    width, height, colours = png_pixels(screenshot(page, tmp_path / "first-screen.png", tmp_path))
    assert (width, height) == (WIDTH, HEIGHT)
    # text, cards and badges: many colours, and no one colour (a blank or error page) covering almost all of it
    assert len(colours) > 50 and max(colours.values()) < 0.95 * width * height
