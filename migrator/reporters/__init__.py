"""Renderers: pure functions of a finished result (never see syntax trees, never print).

`scan` formats: text, json, sarif, github, gitlab, junit, csv, csv-ops (this module's `render`). The reviewer report
(`migrate report`, HTML and Markdown) lives in `migrator.reporters.report` and renders a
`migrator.reporters.report_data.ReportData`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from migrator.engine.scanned_lines import SourceLines
    from migrator.ground.model import RunResult

FORMATS = ("text", "json", "sarif", "github", "gitlab", "junit", "csv", "csv-ops")
READS_SOURCES = ("sarif", "github", "gitlab")  # formats given `lines_of`


def render(result: RunResult, fmt: str, color: bool = False, lines_of: SourceLines | None = None,
           include_info: bool = False) -> str:
    """`lines_of(path) -> list[str] | None` gives SARIF its partialFingerprints, and places notebook
    findings (SARIF, github, gitlab) in the raw file (optional). SARIF, github, gitlab and junit emit
    warnings and errors unless `include_info`; csv has every finding, csv-ops every op the code calls."""
    if fmt == "json":
        from migrator.reporters import json_report

        return json_report.render(result)
    if fmt == "sarif":
        from migrator.reporters import sarif

        return sarif.render(result, lines_of=lines_of, include_info=include_info)
    if fmt == "github":
        from migrator.reporters import github

        return github.render(result, lines_of=lines_of, include_info=include_info)
    if fmt == "gitlab":
        from migrator.reporters import gitlab

        return gitlab.render(result, lines_of=lines_of, include_info=include_info)
    if fmt == "junit":
        from migrator.reporters import junit

        return junit.render(result, include_info=include_info)
    if fmt == "csv":
        from migrator.reporters import csv_table

        return csv_table.render(result)
    if fmt == "csv-ops":
        from migrator.reporters import ops_csv

        return ops_csv.render_scan(result)
    from migrator.reporters import text

    return text.render(result, color=color)
