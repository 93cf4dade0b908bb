"""Renderers: pure functions of a finished result (never see syntax trees, never print)."""

from __future__ import annotations

FORMATS = ("text", "json")


def render(result, fmt: str, color: bool = False) -> str:
    if fmt == "json":
        from migrator.reporters import json_report

        return json_report.render(result)
    from migrator.reporters import text

    return text.render(result, color=color)
