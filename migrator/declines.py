"""A site the fixer declined is manual from then on, and says why: after `migrate fix` (from its plan)
and in every later scan at that root (from `.migrate/fix-record.json`), so no count calls it fixable."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from migrator.model import RunResult, finding_counts


def declined_are_manual(remaining: RunResult, plan) -> RunResult:
    """A site the fixer declined is manual from now on, and says why (it is not "auto-fixable")."""
    reasons: dict[tuple[str, str, str], list[str]] = {}
    for change in plan.changes:
        for finding, why in change.declined:
            reasons.setdefault((change.path, finding.code, finding.symbol), []).append(why)
    return mark_manual(remaining, reasons)


def recorded(root: Path) -> dict[tuple[str, str, str], list[str]]:
    """Declined sites from the last `migrate fix` at this root (`.migrate/fix-record.json`)."""
    from migrator.jsonfile import read_json_or_none

    try:
        record = read_json_or_none(root / ".migrate" / "fix-record.json", root=root) or {}
        entries = record.get("declined") or []
        reasons: dict[tuple[str, str, str], list[str]] = {}
        for e in entries:
            reasons.setdefault((e["path"], e["code"], e["symbol"]), []).append(str(e["reason"]))
        return reasons
    except (KeyError, TypeError, AttributeError):
        return {}  # a record we cannot read: findings stay as the catalogue says


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
