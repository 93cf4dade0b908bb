"""Which findings the machine formats (SARIF, GitHub annotations) emit, at which level.

By default only warnings and errors: a code-scanning tab or a PR's "Files changed" view is for work
to do, and thousands of info-level op notes bury it (timm: 1 598). `--include-info` adds the notes.
Framework routes (`--route`): a covered finding is a note (the route handles it), a gated one a
warning that names the flag to set, a finding the route leaves keeps its level; the route mark is
appended to the message.
"""

from __future__ import annotations

from collections.abc import Iterable

from migrator.ground.model import Finding


def level(f: Finding) -> str:
    """error | warning | info for one finding, after its route mark."""
    if f.route is not None and f.route.status == "covered":
        return "info"
    if f.route is not None and f.route.status == "gated":
        return "warning" if f.severity != "info" else "info"
    return f.severity


def emitted(findings: Iterable[Finding], include_info: bool = False) -> list[Finding]:
    return [f for f in findings if include_info or level(f) != "info"]


def message_suffix(f: Finding) -> str:
    from migrator.reporters.routes import mark_text

    return mark_text(f)
