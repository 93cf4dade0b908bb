"""GitLab Code Quality report: a JSON array of issues (`artifacts:reports:codequality`).

Each issue: `description`, `check_name` (the rule code), `fingerprint`, `severity` (info / minor /
major / critical / blocker), `location.path` and `location.lines.begin`. The fingerprint is the
sha256 of path, code and the finding's source line (stripped), so it survives lines moving; the
n-th repeat of the same triple in a file adds `n` (GitLab needs them unique). Which findings: those
the machine formats emit (`annotations.emitted`).
"""

from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING

from migrator.ground.model import RunResult
from migrator.ground.safe_text import dumps

if TYPE_CHECKING:
    from migrator.engine.scanned_lines import SourceLines

# error: the code cannot run on an NPU as is; warning: work to do; info: a note
SEVERITY = {"error": "critical", "warning": "major", "info": "info"}


def fingerprint(path: str, code: str, line_text: str, repeat: int = 0) -> str:
    key = "\0".join([path, code, line_text.strip()] + ([str(repeat)] if repeat else []))
    return hashlib.sha256(key.encode("utf-8", errors="surrogateescape")).hexdigest()


def render(result: RunResult, lines_of: SourceLines | None = None, include_info: bool = False) -> str:
    from migrator.engine.scanned_lines import CellLines
    from migrator.reporters.annotations import emitted, level, message_suffix

    cells = CellLines(lines_of) if lines_of is not None else None
    seen: dict[tuple[str, str, str], int] = {}
    issues = []
    for f in emitted(result.findings, include_info):
        text = (cells.line(f.path, f.line, f.cell) if cells is not None else None) or f.symbol
        key = (f.path, f.code, text.strip())
        repeat = seen.get(key, 0)
        seen[key] = repeat + 1
        line = f.line
        if f.cell is not None:  # the raw JSON line of a notebook cell's line, else the file's first
            raw = cells.raw_position(f.path, f.cell, f.line) if cells is not None else None
            line = raw[0] if raw else 1
        issues.append({
            "description": f"{f.code} {f.name}: {f.message}{message_suffix(f)}",
            "check_name": f.code,
            "fingerprint": fingerprint(f.path, f.code, text, repeat),
            "severity": SEVERITY[level(f)],
            "location": {"path": f.path, "lines": {"begin": line}},
        })
    return dumps(issues, indent=2) + "\n"
