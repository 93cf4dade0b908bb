"""The lines of a Python file that import a training framework (`routes/detect.py`'s import evidence), found by
the scan's worker in the bytes it already read, so that route detection does not read every file again.

A line counts when, decoded as UTF-8 (bad bytes replaced), it matches `IMPORT_LINE`; `import_lines` finds the
same lines with one substring search per import root instead of that pattern's try at every position.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from migrator.ground.word_search import byte_automaton

# import root -> framework; accelerate and Trainer scripts count as transformers (the HF route)
IMPORT_FRAMEWORK = {
    "megatron": "megatron-core", "deepspeed": "deepspeed", "transformers": "transformers",
    "accelerate": "transformers", "lightning": "lightning", "pytorch_lightning": "lightning", "mmengine": "mmengine",
}
IMPORT_LINE = re.compile(r"^[ \t]*(?:from|import)[ \t]+(" + "|".join(IMPORT_FRAMEWORK) + r")\b", re.MULTILINE)
MAX_EVIDENCE = 3  # import sites listed per framework
IMPORT_HEAD = rb"[ \t]*(?:from|import)[ \t]+"  # a line's text before the import root
_HEAD = re.compile(IMPORT_HEAD)
_ROOTS = tuple((root, root.encode()) for root in IMPORT_FRAMEWORK)

ImportLines = tuple[tuple[str, int], ...]  # (import root, line), in line order


def import_lines(data: bytes, candidates: Iterable[tuple[int, int]] | None = None) -> ImportLines:
    """`IMPORT_LINE`'s matches in `data.decode("utf-8", "replace")` as (root, line), the first `MAX_EVIDENCE` of
    each framework. A root starts a match where the text from its line's start up to it is `_HEAD` (ASCII:
    the same in the bytes) and no word character follows it (`\\b`): one RE2 pass over the bytes finds the
    candidates (a substring search per root without RE2). `candidates`: the (start, end) of every match of
    `IMPORT_HEAD` and a root in `data`, in order, where the caller found them."""
    if candidates is not None:
        found = [(start, data[start:end].split()[-1].decode()) for start, end in candidates
                 if not _word_follows(data, end)]
    elif (automaton := _automaton()) is not None:
        found = [(m.start(), m.group(1).decode()) for m in automaton.finditer(data) if not _word_follows(data, m.end())]
    else:
        found = _found_by_roots(data)
    lines: list[tuple[str, int]] = []
    per_framework: dict[str, int] = {}
    line, previous = 1, 0
    for start, root in found:
        framework = IMPORT_FRAMEWORK[root]
        if per_framework.get(framework, 0) >= MAX_EVIDENCE:
            continue
        per_framework[framework] = per_framework.get(framework, 0) + 1
        line += data.count(b"\n", previous, start)
        previous = start
        lines.append((root, line))
    return tuple(lines)


def _found_by_roots(data: bytes) -> list[tuple[int, str]]:
    """(line start, root) of each import line, in order, by a substring search per root."""
    found: list[tuple[int, str]] = []
    for root, word in _ROOTS:
        at = data.find(word)
        while at >= 0:
            start = data.rfind(b"\n", 0, at) + 1
            if _HEAD.fullmatch(data, start, at) and not _word_follows(data, at + len(word)):
                found.append((start, root))
            end = data.find(b"\n", at)  # a line's first occurrence is the only one that can follow its head
            at = data.find(word, end + 1) if end >= 0 else -1
    return sorted(found)


_AUTOMATON: list[Any] = []


def _automaton() -> Any:
    """`IMPORT_LINE` without its `\\b` (checked on the decoded character after), compiled by RE2; None without it."""
    if not _AUTOMATON:
        roots = b"|".join(re.escape(root.encode()) for root in IMPORT_FRAMEWORK)
        _AUTOMATON.append(byte_automaton(rb"(?m)^[ \t]*(?:from|import)[ \t]+(" + roots + rb")", capture=True))
    return _AUTOMATON[0]


def pattern_lines(text: str) -> ImportLines:
    """`import_lines` by `IMPORT_LINE` itself, on decoded text (the definition the fast search keeps to)."""
    lines: list[tuple[str, int]] = []
    per_framework: dict[str, int] = {}
    for m in IMPORT_LINE.finditer(text):
        framework = IMPORT_FRAMEWORK[m.group(1)]
        if per_framework.get(framework, 0) < MAX_EVIDENCE:
            per_framework[framework] = per_framework.get(framework, 0) + 1
            lines.append((m.group(1), text.count("\n", 0, m.start()) + 1))
    return tuple(lines)


def _word_follows(data: bytes, at: int) -> bool:
    """Whether the character decoded at byte `at` is a word character as `re`'s `\\b` sees it (str pattern)."""
    if at >= len(data):
        return False
    byte = data[at]
    if byte < 0x80:
        return chr(byte).isalnum() or byte == 0x5F  # `_`
    char = data[at:at + 4].decode("utf-8", "replace")[0]  # a character starts here: the word before is ASCII
    return char.isalnum() or char == "_"
