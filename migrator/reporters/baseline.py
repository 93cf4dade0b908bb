"""Baselines for incremental adoption: record today's findings, then report only new ones.

    migrate scan . --write-baseline .migrate-baseline.json   # once; commit the file
    migrate scan . --baseline .migrate-baseline.json         # CI / pre-commit: only new findings

A finding is identified by (path, code, fingerprint, occurrence), never by its line number, so
inserting or deleting lines elsewhere does not make old findings "new":

* fingerprint = first 16 hex digits of sha1(code NUL symbol NUL source line), where the source line
  is the finding's first line with runs of whitespace collapsed (re-indenting keeps it); in a
  notebook it is that line of the finding's cell, not a line of the JSON file;
* occurrence = index among the findings of the same file with the same code and fingerprint, in
  line order (two identical `x.cuda()` lines are two entries; a third one is new).

Editing the flagged line itself, renaming the file or changing the rule's symbol makes the finding
new again, which is what a reviewer wants to see. Pure functions over a RunResult and the file text
(``lines_of(path) -> list[str] | None``); reading files is the caller's business (see
`migrator.engine.scanned_lines.SourceLines`).
"""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from pathlib import Path

from migrator.ground.jsonfile import JsonObject, JsonValue, read_json
from migrator.ground.model import Finding, RunResult, finding_counts

SCHEMA_VERSION = 1
LinesOf = Callable[[str], "list[str] | None"]
Key = tuple[str, str, str, int]  # path, code, fingerprint, occurrence


class BaselineError(ValueError):
    """The baseline file is missing or malformed (exit 2; the message names the file)."""


def normalise(line: str | None) -> str:
    return " ".join((line or "").split())


def fingerprint(code: str, symbol: str, line: str | None) -> str:
    text = f"{code}\0{symbol}\0{normalise(line)}"
    return hashlib.sha1(text.encode("utf-8", errors="replace")).hexdigest()[:16]


def keys(findings: Iterable[Finding], lines_of: LinesOf) -> list[tuple[Finding, Key]]:
    """Each finding with its baseline key, in the findings' (path, line, column) order."""
    from migrator.engine.scanned_lines import CellLines

    source = CellLines(lines_of)  # a notebook finding's line is a line of its cell
    seen: Counter = Counter()
    out = []
    for f in sorted(findings, key=Finding.sort_key):
        text = source.line(f.path, f.line, f.cell)
        fp = fingerprint(f.code, f.symbol, text)
        group = (f.path, f.code, fp)
        out.append((f, (f.path, f.code, fp, seen[group])))
        seen[group] += 1
    return out


def make(result: RunResult, lines_of: LinesOf) -> JsonObject:
    entries: list[JsonValue] = [
        {"code": code, "path": path, "fingerprint": fp, "occurrence": occ, "line": f.line, "symbol": f.symbol}
        for f, (path, code, fp, occ) in keys(result.findings, lines_of)
    ]
    return {
        "schema_version": SCHEMA_VERSION,
        "tool": {"name": result.tool.name, "version": result.tool.version},
        "findings": entries,
    }


def dumps(data: JsonObject) -> str:
    """An undecodable file name is written escaped, with its exact bytes in `path_bytes` (safe_text)."""
    from migrator.ground.safe_text import dumps as safe_dumps

    return safe_dumps(data, indent=1) + "\n"


@dataclass(frozen=True)
class Baseline:
    source: str
    keys: frozenset[Key]

    def __len__(self) -> int:
        return len(self.keys)


def parse(data: object, source: str) -> Baseline:
    from migrator.ground.schema_check import SchemaMismatch, check

    try:
        check(data, "baseline.schema.json")
    except SchemaMismatch as exc:
        raise BaselineError(f"{source}: not an ascend-migrate baseline: {exc}") from None
    from migrator.ground.safe_text import name_from_json

    return Baseline(
        source,
        frozenset((name_from_json(e), e["code"], e["fingerprint"], e["occurrence"]) for e in data["findings"]),  # type: ignore[index]
    )


def load(path: str | Path) -> Baseline:
    path = Path(path)
    hint = f" (create it with `migrate scan --write-baseline {path}`)"
    return parse(read_json(path, "baseline file", BaselineError, hint), str(path))


def split(result: RunResult, baseline: Baseline, lines_of: LinesOf) -> tuple[list[Finding], list[Finding]]:
    """(new findings, baselined findings)."""
    new: list[Finding] = []
    known: list[Finding] = []
    for f, key in keys(result.findings, lines_of):
        (known if key in baseline.keys else new).append(f)
    return new, known


def filter_result(result: RunResult, baseline: Baseline, lines_of: LinesOf) -> RunResult:
    """The result with baselined findings removed; summary counts recomputed, summary.baselined set."""
    new, known = split(result, baseline, lines_of)
    return with_findings(result, new, baselined=len(known) + (result.summary.baselined or 0))


def with_findings(result: RunResult, findings: Iterable[Finding], baselined: int | None = None) -> RunResult:
    findings = tuple(sorted(findings, key=Finding.sort_key))
    summary = replace(result.summary, findings=len(findings), **finding_counts(findings), baselined=baselined)
    return replace(result, summary=summary, findings=findings)
