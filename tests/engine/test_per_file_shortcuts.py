"""Per-file shortcuts of the scan held to what they stand for: an ASCII text's columns without a per-line test, a file
without directives keeping its findings untouched, and the collector leaving out what was alive before a scan."""

from __future__ import annotations

import gc

import pytest

from migrator.catalogue.loader import load_catalogue
from migrator.engine.file_scan import FileScan, ScanOptions
from migrator.engine.scan_file import _apply_suppressions
from migrator.engine.source import SourceText, split_lines
from migrator.engine.suppress import Directives, parse_directives
from migrator.ground.cycles import earlier_objects_frozen


def _column_by_line(source: SourceText, line: int, offset: int) -> int:
    """The column as found before the shortcut: each line tested on its own."""
    if line < 1 or line > len(source.lines) or source.lines[line - 1].isascii():
        return offset + 1
    return len(source.lines[line - 1].encode("utf-8")[:offset].decode("utf-8", errors="ignore")) + 1


@pytest.mark.parametrize("text", ["x = 1\r\ny.cuda()\n", "a = 'é'\nb = 'İ' + c\n", "", "\x0cx\rz\n", "é"])
def test_columns_are_those_of_each_lines_bytes(text):
    source = SourceText(text, split_lines(text), "utf-8")
    for line in range(0, len(source.lines) + 2):
        for offset in range(0, 8):
            assert source.char_column(line, offset) == _column_by_line(source, line, offset)


def _scan_with(findings_text: str) -> FileScan:
    scan = FileScan("m.py", load_catalogue(), ScanOptions().selector_for("m.py"))
    scan.meta("parse-error", "cannot parse m.py: x", 1, 1)
    scan.meta("unreadable-file", findings_text, 2, 1)
    return scan


def test_no_directive_keeps_every_finding():
    scan = _scan_with("y")
    kept, hidden = _apply_suppressions(scan, Directives(False, ()))
    assert (kept, hidden) == (scan.findings, 0) and kept is not scan.findings
    # the same as a file whose directives hide nothing and report nothing (`noqa` naming another code)
    other = _apply_suppressions(scan, parse_directives(("x  # noqa: ZZZ999",)))
    assert other == (kept, hidden)


def test_objects_alive_before_are_frozen_inside_and_thawed_after():
    assert gc.get_freeze_count() == 0
    with earlier_objects_frozen():
        assert gc.get_freeze_count() > 0
        made_inside = [[] for _ in range(10)]
        assert all(gc.is_tracked(x) for x in made_inside)
    assert gc.get_freeze_count() == 0


def test_a_freeze_made_by_someone_else_is_left_as_it_is():
    gc.freeze()
    try:
        count = gc.get_freeze_count()
        with earlier_objects_frozen():
            assert gc.get_freeze_count() == count
        assert gc.get_freeze_count() == count
    finally:
        gc.unfreeze()
