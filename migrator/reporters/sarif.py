"""SARIF 2.1.0 for code scanning (GitHub `upload-sarif`, VS Code SARIF viewer).

One run; `tool.driver.rules` holds every rule that has a result, with its documentation from the
catalogue (`help.markdown` is the `migrate rule CODE` page). Locations are relative to the
`SRCROOT` base (the scan root); regions use 1-based character columns with an exclusive end
(`columnKind: unicodeCodePoints`), exactly the findings' own positions. A notebook finding's
position counts within its cell: its region points at the raw JSON line holding that source line
(read back through `lines_of`), and the message starts with "cell N, line L: ".

`fixes` needs concrete replacement text, which only `migrate fix` computes: pass
``replacements={finding: [Replacement, ...]}`` to emit them; without it the fix title and kind
go into the result's `properties`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from migrator.catalogue.loader import Rule
    from migrator.engine.scanned_lines import CellLines

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Any
from urllib.parse import quote

from migrator.ground.model import Finding, RunResult
from migrator.ground.safe_text import dumps

SARIF_SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"
LEVEL = {"error": "error", "warning": "warning", "info": "note"}
FINGERPRINT_KEY = "migrateFingerprint/v1"
# pyproject names no public URL for the project: the rule reference relative to the repository root, until it does
RULES_DOC = "docs/rules.md"


@dataclass(frozen=True)
class Replacement:
    """Replace the text between (line, column) and (end_line, end_column) (end exclusive) in `path`."""

    path: str
    line: int
    column: int
    end_line: int
    end_column: int
    text: str


def _uri(path: str) -> str:
    """Percent-encoded; the bytes of an undecodable name as themselves (`bad%FFname.py`, lossless)."""
    return quote(PurePosixPath(path).as_posix(), safe="/", errors="surrogateescape")


def _root_uri(root: str) -> str:
    uri = "file://" + quote(root if root.startswith("/") else "/" + root, safe="/:", errors="surrogateescape")
    return uri if uri.endswith("/") else uri + "/"


def _placeholders(text: str) -> str:
    return text.replace("{symbol}", "<name>").replace("{replacement}", "<replacement>")


def _plain(markdown: str) -> str:
    """Markdown to readable plain text: no heading marks, fences or backticks."""
    out = []
    for line in markdown.splitlines():
        if line.startswith("```"):
            continue
        out.append(re.sub(r"^#+\s*", "", line).replace("`", "").replace("**", ""))
    return "\n".join(out).strip() + "\n"


def rule_anchor(rule: Rule) -> str:
    """The GitHub anchor of the rule's `## CODE `name`` heading in docs/rules.md."""
    return f"{rule.code.lower()}-{rule.name}"


def rule_descriptor(rule: Rule) -> dict:
    from migrator.catalogue.docs import rule_markdown

    md = rule_markdown(rule, heading="#")
    docs = f"{RULES_DOC}#{rule_anchor(rule)}"
    return {
        "id": rule.code,
        "name": rule.name,
        "helpUri": docs,
        "shortDescription": {"text": _placeholders(rule.message)},
        "fullDescription": {"text": rule.docs.why or _placeholders(rule.message)},
        "help": {"text": _plain(md), "markdown": md},
        "defaultConfiguration": {"level": LEVEL[rule.severity]},
        "properties": {
            "tags": ["ascend-migrate", rule.family],
            "family": rule.family,
            "fix_kind": rule.fix_kind,
            "docs": docs,
        },
    }


def _region(line: int, column: int, end_line: int, end_column: int) -> dict:
    region = {"startLine": line, "startColumn": column, "endLine": max(end_line, line)}
    if end_line > line or end_column > column:
        region["endColumn"] = end_column
    return region


def _where(f: Finding) -> str:
    return f"cell {f.cell}, line {f.line}: " if f.cell is not None else ""


def _physical(f: Finding, source: CellLines | None) -> dict:
    """A notebook finding's `line`/`column` count within its cell: the region points into the raw
    JSON file instead (the cell position is in the message and `properties.cell`); no region when the
    file cannot be read back (no `lines_of`)."""
    location: dict = {"artifactLocation": {"uri": _uri(f.path), "uriBaseId": "SRCROOT"}}
    if f.cell is None:
        location["region"] = _region(f.line, f.column, f.end_line, f.end_column)
        return location
    start = source.raw_position(f.path, f.cell, f.line, f.column) if source is not None else None
    if start is not None and source is not None:
        end = source.raw_position(f.path, f.cell, max(f.end_line, f.line), f.end_column)
        if end is None or end < start:
            end = (start[0], start[1] + 1)
        location["region"] = _region(start[0], start[1], end[0], end[1])
    return location


def render(
    result: RunResult,
    lines_of: Callable[[str], list[str] | None] | None = None,
    replacements: Mapping[Finding, Sequence[Replacement]] | None = None,
    include_info: bool = False,
) -> str:
    """Warnings and errors; `include_info` adds the info-level notes (migrator/reporters/annotations.py)."""
    from migrator.catalogue.loader import load_catalogue
    from migrator.reporters.annotations import emitted, level, message_suffix

    catalogue = load_catalogue()
    shown = emitted(result.findings, include_info)
    codes = sorted({f.code for f in shown})
    rules: list[dict[str, Any]] = []
    index: dict[str, int] = {}
    for code in codes:
        rule = catalogue.get(code)
        index[code] = len(rules)
        if rule is not None:
            rules.append(rule_descriptor(rule))
        else:  # a code the installed catalogue does not know (should not happen)
            rules.append({"id": code, "shortDescription": {"text": code}})

    source = None
    if lines_of is not None:
        from migrator.engine.scanned_lines import CellLines

        source = CellLines(lines_of)
    prints: dict[int, str] = {}
    if lines_of is not None:
        from migrator.reporters.baseline import keys

        by_id = {id(f): f"{fp}:{occ}" for f, (_, _, fp, occ) in keys(result.findings, lines_of)}
        prints = by_id

    results = []
    for f in shown:
        item: dict = {
            "ruleId": f.code,
            "ruleIndex": index[f.code],
            "level": LEVEL[level(f)],
            "message": {"text": _where(f) + f.message + (f" (fix: {f.fix.title})" if f.fix else "") + message_suffix(f)},
            "locations": [{"physicalLocation": _physical(f, source)}],
        }
        if id(f) in prints:
            item["partialFingerprints"] = {FINGERPRINT_KEY: prints[id(f)]}
        edits = (replacements or {}).get(f)
        if f.fix and edits:
            item["fixes"] = [_fix(f, edits)]
        props: dict = {"family": f.family, "symbol": f.symbol}
        if f.fix:
            props["fix"] = {"kind": f.fix.kind, "title": f.fix.title}
        if f.coverage is not None:
            props["coverage"] = f.coverage.to_dict()
        if f.cell is not None:
            props["cell"] = {"index": f.cell, "line": f.line, "column": f.column, "end_line": f.end_line, "end_column": f.end_column}
        if f.route is not None:
            props["route"] = f.route.to_dict()
        item["properties"] = props
        results.append(item)

    run = {
        "tool": {
            "driver": {
                "name": result.tool.name,
                "version": result.tool.version,
                "semanticVersion": result.tool.version,
                "rules": rules,
                "properties": {"catalogue": result.tool.catalogue, "coverage_table": result.tool.coverage_table},
            }
        },
        "originalUriBaseIds": {"SRCROOT": {"uri": _root_uri(result.summary.root)}},
        "columnKind": "unicodeCodePoints",
        "results": results,
        "properties": {
            "files_scanned": result.summary.files_scanned,
            "suppressed": result.summary.suppressed,
            "not_emitted": {"info": len(result.findings) - len(shown), "hint": "--include-info emits the info-level notes"},
            **({"baselined": result.summary.baselined} if result.summary.baselined is not None else {}),
        },
    }
    doc = {"$schema": SARIF_SCHEMA, "version": "2.1.0", "runs": [run]}
    return dumps(doc, indent=2) + "\n"  # other text with undecodable bytes: escaped (safe_text.json_safe)


def _fix(f: Finding, edits: Sequence[Replacement]) -> dict:
    by_path: dict[str, list[Replacement]] = {}
    for e in edits:
        by_path.setdefault(e.path, []).append(e)
    return {
        "description": {"text": f.fix.title if f.fix else ""},
        "artifactChanges": [
            {
                "artifactLocation": {"uri": _uri(path), "uriBaseId": "SRCROOT"},
                "replacements": [
                    {
                        "deletedRegion": _region(e.line, e.column, e.end_line, e.end_column),
                        "insertedContent": {"text": e.text},
                    }
                    for e in items
                ],
            }
            for path, items in by_path.items()
        ],
    }
