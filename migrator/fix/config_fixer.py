"""Exact fixes in YAML/JSON/TOML configs: replace the characters of one scalar, then prove it.

No re-dumping: each edit rewrites only the characters of the flagged scalar at the position the
parser gave, so comments, key order, quoting, indentation and the trailing newline stay as they were.
The edited text is re-parsed and compared with the original (engine/config_verify.verify): if
anything but the intended values changed, nothing is written and every finding is declined.
"""

from __future__ import annotations

from dataclasses import replace

from migrator.catalogue import units
from migrator.catalogue.loader import load_catalogue
from migrator.engine import config_checker as cc
from migrator.engine import config_reader
from migrator.engine.config_verify import verify
from migrator.ground.model import Finding

EXACT_CODES = {"DEV017", "DIST007", "ENV001", "ENV002"}


def _replacement(finding: Finding, hit: cc.ConfigHit) -> str | None:
    if finding.code in ("DEV017", "DIST007"):
        return hit.replacement
    if finding.family == "environment" and hit.old == finding.symbol:
        match = load_catalogue().match_symbol(f"$env.{finding.symbol}")
        return match.replacement if match else None
    return None


def fix_config(rel: str, text: str, findings: list[Finding], target: str) -> tuple[str, list[Finding], list[tuple[Finding, str]]]:
    rules = load_catalogue().rules
    declined: list[tuple[Finding, str]] = []
    for f in findings:  # the scan's own verdict (rule precheck) for a config and this target
        if (why := units.text_reason(rules[f.code], f.symbol, target, "config")) is not None:
            declined.append((f, why))
    findings = [f for f in findings if all(f is not d for d, _ in declined)]
    if not findings:
        return text, [], declined
    try:
        parsed = config_reader.parse_config(text, config_reader.config_format(rel))
    except config_reader.ConfigParseError as exc:
        return text, [], declined + [(f, f"cannot parse the file: {exc}") for f in findings]
    index = config_reader.LineIndex(text)
    hits: dict[tuple[int, int, str], cc.ConfigHit] = {}
    for hit in cc.config_hits(parsed):
        line, col = index.position(hit.start)
        hits.setdefault((line, col, hit.symbol), hit)
    chosen: list[cc.ConfigHit] = []
    applied: list[Finding] = []
    for f in findings:
        edit = _edit_for(f, hits.get((f.line, f.column, f.symbol)))
        if isinstance(edit, str):
            declined.append((f, edit))
            continue
        chosen.append(edit)
        applied.append(f)
    if not chosen:
        return text, [], declined
    after = config_reader.apply_edits(text, [(h.start, h.end, new) for h in chosen if (new := h.replacement) is not None])
    why = verify(parsed, after, chosen)
    if why:
        return text, [], declined + [(f, why) for f in applied]
    return after, applied, declined


def _edit_for(f: Finding, found: cc.ConfigHit | None) -> cc.ConfigHit | str:
    """The hit at the finding's position with its replacement, or why the finding is declined."""
    if f.code not in EXACT_CODES or f.fix is None:
        return "no exact rewrite"
    if found is None:
        return "the text at this position changed"
    if found.shared:
        return ("the value is shared through a YAML anchor or merge key; rewriting it would change "
                "every place that uses it: edit by hand")
    new = _replacement(f, found)
    if new is None or found.start < 0:
        return "no exact rewrite at this position (escaped or folded text)"
    return replace(found, replacement=new)
