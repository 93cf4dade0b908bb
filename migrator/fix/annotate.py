"""`migrate fix --annotate`: each site the fix left for a person marked `# MIGRATE(CODE): reason`."""

from __future__ import annotations

import ast
from pathlib import Path

from migrator.engine.scan_file import ScanOptions, scan_text_content
from migrator.fix import text_fixer
from migrator.ground.model import Finding


def annotated(rel: str, new: str, findings: list[Finding], applied: list[Finding], declined: list[tuple[Finding, str]],
              scan: ScanOptions, strip: bool, encoding: str) -> str:
    """`new` with its sites left for a person marked (`--annotate`); a Python file the marks would break
    gets none (its marks stripped, unless `strip`: --strip-annotations). `scan`: what judges the sites."""
    annotated = _annotate(rel, new, findings, applied, declined, scan, encoding)
    if rel.endswith(".py"):
        try:
            ast.parse(annotated)
        except SyntaxError:
            return text_fixer.strip_annotations(annotated) if not strip else annotated
    return annotated


def _annotate(rel: str, text: str, findings: list[Finding], applied: list[Finding], declined: list[tuple[Finding, str]],
              scan: ScanOptions, encoding: str = "utf-8") -> str:
    """Mark every site the fix could not handle with `# MIGRATE(CODE): reason` (Python and shell).

    Notebooks, container files and configs are not annotated: a comment line inside a JSON string,
    a Dockerfile heredoc or a YAML block scalar would change what the file means."""
    from migrator.engine.discover import file_kind

    kind = file_kind(Path(rel))
    if kind not in ("python", "shell"):
        return text

    reasons = {(f.code, f.symbol): why for f, why in declined}
    remaining = scan_text_content(text, rel, kind, scan)
    starts: dict[int, int] = {}  # shell: a note goes above the first line of a `\`-continued command
    if kind == "shell":
        from migrator.engine.text_checkers import logical_lines

        for _, parts in logical_lines(tuple(text.splitlines())):
            for number, _ in parts:
                starts[number] = parts[0][0]
    notes: dict[int, list[tuple[str, str]]] = {}
    for f in remaining.findings:
        if f.family == "meta" or (f.severity == "info" and f.fix is None and (f.code, f.symbol) not in reasons):
            continue
        why = reasons.get((f.code, f.symbol)) or f.message
        line = starts.get(f.line, f.line) if kind == "shell" else f.line
        notes.setdefault(line, []).append((f.code, _encodable(why.replace("\n", " ")[:160], encoding)))
    return text_fixer.annotate(text, notes)


ASCII_PUNCTUATION = str.maketrans({"\u2014": "-", "\u2013": "-", "\u2018": "'", "\u2019": "'", "\u201c": '"',
                                   "\u201d": '"', "\u2026": "...", "\u00d7": "x", "\u2192": "->", "\u2265": ">=",
                                   "\u2264": "<=", "\u221a": "sqrt", "\u00b2": "^2"})


def _encodable(note: str, encoding: str) -> str:
    """A note the file's encoding can hold (a latin-1 file gets `-` for an em dash, `?` for the rest)."""
    try:
        note.encode(encoding)
        return note
    except UnicodeEncodeError:
        return note.translate(ASCII_PUNCTUATION).encode(encoding, "replace").decode(encoding)
    except LookupError:
        return note
