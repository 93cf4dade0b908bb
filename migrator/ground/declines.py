"""A site the fixer declined is manual from then on, and says why: after `migrate fix` (from its plan)
and in every later scan at that root (from `.migrate/fix-record.json`), so no count calls it fixable."""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Protocol

from migrator.ground.model import Finding, RunResult, finding_counts


class ChangeLike(Protocol):
    """What is read of a fix/runner.FileChange: its path and the sites declined in it, with why."""

    @property
    def path(self) -> str: ...

    @property
    def declined(self) -> Sequence[tuple[Finding, str]]: ...


class FixPlanLike(Protocol):
    @property
    def changes(self) -> Sequence[ChangeLike]: ...


def declined_are_manual(remaining: RunResult, plan: FixPlanLike) -> RunResult:
    """A site the fixer declined is manual from now on, and says why (it is not "auto-fixable")."""
    reasons: dict[tuple[str, str, str], list[str]] = {}
    for change in plan.changes:
        for finding, why in change.declined:
            reasons.setdefault((change.path, finding.code, finding.symbol), []).append(why)
    return mark_manual(remaining, reasons)


def recorded(root: Path) -> dict[tuple[str, str, str], list[str]]:
    """Declined sites from the last `migrate fix` at this root (`.migrate/fix-record.json`); none from a
    record that cannot be read (findings then stay as the catalogue says; `migrate fix` names the problem)."""
    path = root / ".migrate" / "fix-record.json"
    if not os.path.lexists(path):  # the record's classes are not imported for a root without one
        return {}
    from migrator.ground.fix_record import FixRecordError, load_if_present

    try:
        # typed and strict, without the schema pass: scan should not pay jsonschema's import for it
        record = load_if_present(path, root=root, schema=False)
    except FixRecordError:
        return {}
    reasons: dict[tuple[str, str, str], list[str]] = {}
    for d in record.declined if record is not None else ():
        reasons.setdefault(d.site, []).append(d.reason)
    return reasons


def mark_manual(remaining: RunResult, reasons: dict[tuple[str, str, str], list[str]]) -> RunResult:
    if not reasons:
        return remaining
    findings = []
    for f in remaining.findings:
        queue = reasons.get((f.path, f.code, f.symbol))
        if f.fix is not None and queue:
            why = queue.pop(0) if len(queue) > 1 else queue[0]
            f = replace(f, fix=None, message=f"{f.message} (not fixed automatically: {why})")
        findings.append(f)
    s = remaining.summary
    summary = replace(s, findings=len(findings), **finding_counts(findings))
    return replace(remaining, findings=tuple(findings), summary=summary)
