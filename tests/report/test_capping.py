"""Very large files and lines are capped in the reviewer report: a window around the finding, a
bounded number of excerpts per file, and a visible note; every finding is still listed."""

from __future__ import annotations

from pathlib import Path

import pytest

from migrator.reporters.excerpts import MAX_FLAGGED_LINES, MAX_LINE_WIDTH, clip_line
from tests.conftest import run_cli

LINE_CHARS = 2_000_000


@pytest.fixture
def long_line_tree(tmp_path: Path) -> Path:
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "demo"\n')
    pad = "a" * (LINE_CHARS // 2)
    (tmp_path / "minified.py").write_text(f'import torch\nblob = "{pad}"; x = torch.zeros(2).cuda(); tail = "{pad}"\n')
    return tmp_path


@pytest.mark.parametrize("fmt", ["html", "md"])
def test_a_huge_line_is_shown_as_a_window_around_the_finding(long_line_tree, fmt):
    out = long_line_tree / f"report.{fmt}"
    proc = run_cli("report", str(long_line_tree), "-o", str(out), "--no-cache")
    assert proc.returncode == 0, proc.stderr
    text = out.read_text()
    assert len(text) < 100_000  # not the 2 MB line
    assert "Capped: line 2 has 2,000,0" in text
    if fmt == "html":
        assert '<mark class="hit">' in text  # the finding is inside the window, highlighted
    else:
        assert "> 2 | …" in text and "torch.zeros(2).cuda()" in text


def test_diffs_of_huge_lines_are_capped(long_line_tree):
    out = long_line_tree / "report.html"
    proc = run_cli("report", str(long_line_tree), "-o", str(out), "--diffs", "--no-cache")
    assert proc.returncode == 0, proc.stderr
    text = out.read_text()
    assert len(text) < 100_000 and "Capped: diff line" in text


def test_a_file_with_many_flagged_lines_shows_a_bounded_excerpt(tmp_path):
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "demo"\n')
    n = MAX_FLAGGED_LINES + 30
    (tmp_path / "many.py").write_text("import torch\n" + "".join(f"x{i} = torch.zeros(2).cuda()\n" for i in range(n)))
    out = tmp_path / "report.html"
    proc = run_cli("report", str(tmp_path), "-o", str(out), "--no-cache")
    assert proc.returncode == 0, proc.stderr
    text = out.read_text()
    assert "Capped: 30 more flagged lines are listed below without their source" in text
    assert f'id="L0-{MAX_FLAGGED_LINES + 1}"' in text and f'id="L0-{n + 1}"' not in text
    assert f"line {n + 1}: " in text  # the last finding is still listed


def test_clip_line_keeps_the_spans_inside_the_window():
    line = "b" * 5000 + "target" + "c" * 5000
    shown, spans, cols = clip_line(line, [(5000, 5006)])
    assert len(shown) <= MAX_LINE_WIDTH + 2 and shown.startswith("…") and shown.endswith("…")
    (start, end), = spans
    assert shown[start:end] == "target"
    assert cols[0] <= 5001 and cols[1] >= 5006
    assert clip_line("short", [(0, 2)]) == ("short", [(0, 2)], None)
