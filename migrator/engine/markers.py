"""Unattributed markers: CUDA-looking tokens on code lines that no rule claimed, so nothing is dropped
silently. Docstrings and the fix's own helpers (`migrator/ground/own_code.py`) are not looked at."""

from __future__ import annotations

import re
from bisect import bisect_right
from collections.abc import Iterable
from typing import Any

from migrator.engine.source import LINE_BREAK, SourceText
from migrator.ground.model import Finding, Marker
from migrator.ground.word_search import WordSet, byte_automaton

MARKER_WORDS = ("cuda", "nccl", "apex", "flash_attn", "xformers", "triton", "transformer_engine", "nvte_", "cudnn")
MARKER = re.compile("(?i)" + "|".join(map(re.escape, MARKER_WORDS)))
# on ASCII text, `MARKER` matches where this one matches the lowered text (a case-insensitive search costs 5x)
_LOWERED_MARKER = re.compile("|".join(map(re.escape, MARKER_WORDS)))
_MARKER_WORDS = WordSet((w.encode() for w in MARKER_WORDS), ignore_case=True)
_BYTE_LINE_BREAK = re.compile(rb"\r\n|\r|\n")
_NON_ASCII_LINE = re.compile(rb"[\x80-\xff][^\r\n]*")  # from a line's first byte past ASCII to its end


def unattributed(
    rel: str, kind: str, source: SourceText, findings: list[Finding], doc_lines: set[int],
    own_names: frozenset[str] = frozenset(), data: bytes | None = None, starts: Iterable[int] | None = None,
) -> tuple[Marker, ...]:
    """`data`: the bytes `source` was decoded from, where the caller has them (one search of the bytes then);
    `starts`: positions in `data`, in order, whose lines hold every marker word of it, where the caller found them."""
    claimed: set[int] = set()
    for f in findings:
        claimed.update(range(f.line, f.end_line + 1))
    own = re.compile(r"\b(?:" + "|".join(map(re.escape, sorted(own_names))) + r")\b") if own_names else None
    out = []
    for number in _lines_to_search(source, data, starts):
        if number in claimed or number in doc_lines:
            continue
        text = source.lines[number - 1]
        code = text.split("#", 1)[0] if kind in ("python", "shell", "dockerfile") else text
        if own:
            code = own.sub(" ", code)  # a call of the fix's own `_migrate_flash_attn` is no CUDA token
        m = _LOWERED_MARKER.search(code.lower()) if code.isascii() else MARKER.search(code)
        if m:
            out.append(Marker(rel, number, m.group(0).lower()))
    return tuple(out)


def _lines_to_search(source: SourceText, data: bytes | None = None, starts: Iterable[int] | None = None,
                     ) -> Iterable[int]:
    """The line numbers that may hold a marker: those where a search of the lowered text found one (most
    files have none), and every line that is not ASCII (case folding differs there). UTF-8 bytes have the
    text's lines and ASCII letters, so where the caller has them they are searched instead, ignoring ASCII case,
    and their non-ASCII lines are those with a byte past ASCII (no lowered text, no walk of every line)."""
    if data is not None and source.encoding in ("utf-8", "utf-8-sig"):
        found = _MARKER_WORDS.starts(data) if starts is None else list(starts)
        if not data.isascii():
            found = sorted([*found, *_non_ascii_lines(data)])
        numbers = _line_numbers(data, found, b"\n", b"\r", _BYTE_LINE_BREAK)
    else:
        lowered = source.lowered  # its line breaks are the text's, whatever lowering does to other characters
        numbers = _line_numbers(lowered, _word_starts(lowered), "\n", "\r", LINE_BREAK)
        if not source.text.isascii():
            numbers.update(n for n, line in enumerate(source.lines, 1) if not line.isascii())
    if not numbers:
        return []  # most files: no line to search, and no need to split the text into lines
    last = len(source.lines)
    return sorted(n for n in numbers if n <= last)


def _non_ascii_lines(data: bytes) -> list[int]:
    """Where each line's first byte past ASCII is (RE2 where installed: `re` tries the class at every position)."""
    if not _NON_ASCII_AUTOMATON:
        _NON_ASCII_AUTOMATON.append(byte_automaton(_NON_ASCII_LINE.pattern))
    pattern = _NON_ASCII_AUTOMATON[0] or _NON_ASCII_LINE
    return [m.start() for m in pattern.finditer(data)]


_NON_ASCII_AUTOMATON: list[Any] = []


def _line_numbers(searched: Any, found: list[int], newline: Any, carriage: Any, breaks: Any) -> set[int]:
    """The numbers of the lines holding the positions `found` (in order) of a text or its bytes."""
    numbers: set[int] = set()
    if found and carriage not in searched:  # a line's number: 1 + the newlines before it
        line, previous = 1, 0
        for at in found:
            line += searched.count(newline, previous, at)
            previous = at
            numbers.add(line)
    elif found:
        starts = [m.end() for m in breaks.finditer(searched)]  # where lines 2, 3, ... begin
        numbers = {bisect_right(starts, at) + 1 for at in found}
    return numbers


def _word_starts(lowered: str) -> list[int]:
    """Where a marker word starts in the lowered text, in order (the lines `_LOWERED_MARKER` finds a match on; a
    C substring search per word is cheaper than the pattern's scan, and most files hold no word at all)."""
    starts: list[int] = []
    for word in MARKER_WORDS:
        at = lowered.find(word)
        while at >= 0:
            starts.append(at)
            at = lowered.find(word, at + 1)
    return sorted(starts)
