"""Every first-screen number (verdict, cards, Markdown table) comes from one progress record and agrees,
before and after `migrate fix` (issue 44: "0 % migrate automatically" beside "Migrated 74 %")."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from migrator import api
from migrator.reporters.report import render

SAMPLE = Path(__file__).resolve().parents[2] / "samples" / "gpt"


def _pages(root: Path) -> tuple[str, str]:
    record = root / ".migrate" / "fix-record.json"
    data = api.report([root], fix_record=record if record.exists() else None, use_cache=False)
    return render(data, "html"), render(data, "md")


def _metric(html: str, name: str) -> str:
    m = re.search(rf'data-metric="{name}">([^<]*)<', html)
    assert m, name
    return m.group(1)


def _agree(html: str, md: str) -> None:
    verdict = re.search(r'id="verdict">([^<]*)<', html).group(1)
    total, fixed, fixable, manual = map(int, re.search(
        r"(\d+) CUDA-dependent sites?: (\d+) fixed, (\d+) fixable automatically, (\d+) manual", verdict).groups())
    assert total == fixed + fixable + manual
    assert int(_metric(html, "sites")) == total
    assert (int(_metric(html, "fixed")), int(_metric(html, "fixable")), int(_metric(html, "manual-sites"))) == (fixed, fixable, manual)
    automatic = re.search(r"\((\S+) automatic\)", verdict).group(1)
    assert _metric(html, "auto") == automatic
    if fixed:
        assert f"{round(100 * fixed / total)}%" == _metric(html, "migrated")
    assert f"**{verdict}**" in md.replace("&#x27;", "'")
    assert f"| **{total}** ({fixed} fixed · {fixable} fixable · {manual} manual) | **{automatic}** " in md


@pytest.mark.parametrize("target", ["npu", "portable"])
def test_verdict_and_cards_agree_before_and_after_fix(tmp_path: Path, target: str) -> None:
    root = tmp_path / "gpt"
    shutil.copytree(SAMPLE, root)
    _agree(*_pages(root))
    api.fix([root], use_cache=False, jobs=1, target=target)
    html, md = _pages(root)
    _agree(html, md)
    assert re.search(r'data-metric="fixed">[1-9]', html)


def test_a_fully_fixed_tree_is_not_nothing_to_migrate(tmp_path: Path) -> None:
    (tmp_path / "train.py").write_text("import torch\nx = torch.zeros(3).cuda()\ntorch.cuda.synchronize()\n")
    api.fix([tmp_path], use_cache=False, jobs=1)
    html, md = _pages(tmp_path)
    for page in (html, md):
        assert "Nothing to migrate" not in page and "No CUDA-only dependencies found" not in page
        assert "nothing left to migrate" in page
    _agree(html, md)
