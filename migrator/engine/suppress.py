"""`# migrate: ignore[CODE, ...]` (trailing, or alone on the line above), `# migrate: skip-file`, and
`# noqa: CODE[, CODE]` (trailing, as ruff/flake8 read it).

Matched by a line map after checking, never inside rules (as ruff does).
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from migrator.engine.source import SourceText, split_lines
from migrator.ground.word_search import WordSet

if TYPE_CHECKING:
    from migrator.ground.model import Finding

DIRECTIVE = re.compile(r"#\s*migrate:\s*(?P<kind>ignore|skip-file)(?P<codes>\[[^\]]*\])?", re.IGNORECASE)
# ruff's noqa grammar: codes after a colon, separated by commas and/or spaces
NOQA = re.compile(r"#\s*noqa(?::[\s]?(?P<codes>[A-Z]+[0-9]+(?:[,\s]+[A-Z]+[0-9]+)*))?", re.IGNORECASE)
SKIP_SCAN_LINES = 30


@dataclass(frozen=True)
class Suppression:
    line: int  # the line the directive applies to
    directive_line: int
    column: int
    codes: tuple[str, ...]  # empty for a bare (blanket) ignore
    noqa: bool = False  # from a noqa comment: shared with other linters, so never reported as bare or unused


@dataclass(frozen=True)
class Directives:
    skip_file: bool
    suppressions: tuple[Suppression, ...]

    def covers(self, code: str, line: int) -> Suppression | None:
        """The suppression hiding `code` on `line`: one naming the code (or a prefix of it), or a bare
        `# migrate: ignore`, which hides every finding on its line (the ruff/flake8 `noqa` convention)."""
        for s in self.suppressions:
            if s.line == line and (not s.codes or any(code.startswith(c) for c in s.codes)):
                return s
        return None


def parse_directives(lines: tuple[str, ...], comment_only: bool = False, lowered: str | None = None) -> Directives:
    """`lowered`: the lines' text lowered, where the caller has it (`SourceText.lowered`)."""
    lowered = "\n".join(lines).lower() if lowered is None else lowered
    if "noqa" not in lowered and "migrate" not in lowered:
        return Directives(False, ())  # most files: no line to look at
    skip = False
    found: list[Suppression] = []
    for number, text in enumerate(lines, 1):
        lowered = text.lower()
        if "noqa" in lowered:
            found.extend(_noqa(text, number))
        if "migrate" not in lowered:
            continue
        for m in DIRECTIVE.finditer(text):
            if m.group("kind").lower() == "skip-file":
                skip = skip or number <= SKIP_SCAN_LINES or text.lstrip().startswith("#")
                continue
            raw = (m.group("codes") or "")[1:-1]
            codes = tuple(c.strip().upper() for c in raw.split(",") if c.strip())
            standalone = text[: m.start()].strip() == ""
            found.append(Suppression(number, number, m.start() + 1, codes))
            if standalone:
                # alone on its line: applies to the next line too
                found.append(Suppression(number + 1, number, m.start() + 1, codes))
    return Directives(skip, tuple(found))


DIRECTIVE_WORDS = (b"noqa", b"migrate")  # every directive holds one, in some ASCII case
_DIRECTIVE_WORDS = WordSet(DIRECTIVE_WORDS, ignore_case=True)


def file_directives(source: SourceText, data: bytes, named: bool | None = None) -> Directives:
    """`parse_directives` of a file decoded from `data`. UTF-8 bytes that name neither word in any ASCII case hold no
    directive: found in one pass, without lowering the text (no character outside ASCII lowers to these words' letters).
    `named`: whether `data` holds such a word, where the caller knows."""
    if source.encoding in ("utf-8", "utf-8-sig") and not (_DIRECTIVE_WORDS.found_in(data) if named is None else named):
        return Directives(False, ())
    return parse_directives(source.lines, lowered=source.lowered)


def _noqa(text: str, number: int) -> list[Suppression]:
    """A `# noqa` naming codes applies to its own line only (ruff, flake8); a bare `# noqa` is left to
    the other linters: it would otherwise hide every migration finding on lines that silence a style check."""
    out = []
    for m in NOQA.finditer(text):
        codes = tuple(c.upper() for c in re.split(r"[,\s]+", m.group("codes") or "") if c)
        if codes:
            out.append(Suppression(number, number, m.start() + 1, codes, noqa=True))
    return out


def with_continued_lines(directives: Directives, text: str, findings: Iterable[Finding]) -> Directives:
    """A Python file's directives, each also applying to the lines whose comment must go on its line (a line
    inside a multi-line string, or continued with a backslash: `comment_lines.continued_lines`). The file is
    tokenized only when a finding is left that no directive covers on its own line."""
    if not directives.suppressions or all(directives.covers(f.code, f.line) for f in findings):
        return directives
    lines, split = split_lines(text), text.splitlines()  # the tokenizer's numbering; `continued_lines`' backslashes'
    if not any(_may_take_continued(s.line, lines, split) for s in directives.suppressions):
        return directives  # no directive's line ends a multi-line string or follows a backslash: nothing to tokenize
    from migrator.engine.comment_lines import continued_lines

    mapped = continued_lines(text)
    if not mapped:
        return directives
    by_line: dict[int, list[Suppression]] = {}
    for s in directives.suppressions:
        by_line.setdefault(s.line, []).append(s)
    extra = [replace(s, line=line) for line, target in mapped.items() for s in by_line.get(target, ())]
    return Directives(directives.skip_file, directives.suppressions + tuple(extra)) if extra else directives


def _may_take_continued(number: int, lines: tuple[str, ...], split: list[str]) -> bool:
    """Whether line `number` can be where an earlier line's comment goes (`comment_lines.continued_lines`): the
    line a multi-line string ends on holds its closing triple quote (or, on 3.12+, a single-quoted f-string's
    quote), or the line before it ends with a backslash (a continuation, or a string continued by one)."""
    if number < 2:
        return False  # a continued line comes before the line its comment goes on
    if number > len(lines) or number > len(split):
        return True  # past the end as numbered one way or the other: let the tokenizer decide
    line = lines[number - 1]
    return ('"""' in line or "'''" in line or lines[number - 2].endswith("\\") or split[number - 2].endswith("\\")
            or (sys.version_info >= (3, 12) and ('"' in line or "'" in line)))
