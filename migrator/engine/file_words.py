"""One RE2 pass over a file's bytes for the words four per-file steps look for, where each ran its own pass: the
marker words (`markers.py`), the directive words (`suppress.py`), the training-dtype candidates
(`catalogue/coverage/_dtypes.py`) and the framework import lines (`ground/framework_imports.py`).

The pass finds non-overlapping matches, leftmost first, so a word that starts inside another's match is not
matched itself. What each step takes from it is exact all the same:
- marker lines: the line of every match, whatever its word (a superset: `markers.unattributed` tests each line
  again; a hidden word lies on the line of the match that hides it, since no word holds a line break);
- directive and training words: whether one occurs; where a match could hide one (some end of its text begins
  one of these words), the bytes around it are searched again;
- import lines: a match of that alternative starts at a line's start, where no match of a word can have begun.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from migrator.catalogue.coverage._dtypes import TRAINING_WORDS
from migrator.engine.markers import MARKER_WORDS
from migrator.engine.suppress import DIRECTIVE_WORDS
from migrator.ground.framework_imports import IMPORT_FRAMEWORK, IMPORT_HEAD
from migrator.ground.word_search import byte_automaton

_MARKERS = frozenset(w.encode() for w in MARKER_WORDS)
_DIRECTIVES = tuple(DIRECTIVE_WORDS)  # ASCII case ignored
_TRAINING = TRAINING_WORDS  # case kept
_LONGEST = max(len(w) for w in (*_DIRECTIVES, *_TRAINING))


@dataclass(frozen=True)
class FileWords:
    """What one pass over a file's bytes found (`file_words`)."""

    starts: tuple[int, ...]  # where each match starts, in order: every marker word's line holds one
    directive: bool  # a directive word occurs, in any ASCII case
    training: bool  # a training-dtype candidate occurs
    imports: tuple[tuple[int, int], ...]  # (start, end) of each `IMPORT_HEAD` + import root match, in order


_AUTOMATON: list[Any] = []


def _automaton() -> Any:
    if not _AUTOMATON:
        ignoring_case = b"|".join(re.escape(w) for w in (*sorted(_MARKERS), *_DIRECTIVES))
        roots = b"|".join(re.escape(root.encode()) for root in IMPORT_FRAMEWORK)
        pattern = (rb"(?i:" + ignoring_case + rb")|" + b"|".join(re.escape(w) for w in _TRAINING)
                   + rb"|(?m:^" + IMPORT_HEAD + rb"(?:" + roots + rb"))")
        _AUTOMATON.append(byte_automaton(pattern))
    return _AUTOMATON[0]


def file_words(data: bytes) -> FileWords | None:
    """The words of `data` in one pass; None without RE2 (each step then searches on its own)."""
    automaton = _automaton()
    if automaton is None:
        return None
    starts: list[int] = []
    imports: list[tuple[int, int]] = []
    directive = training = False
    risky: list[tuple[int, int]] = []  # matches whose text could hide a directive or training word
    for m in automaton.finditer(data):
        start, end = m.span()
        starts.append(start)
        text = data[start:end]
        lowered = text.lower()
        if lowered in _DIRECTIVES:
            directive = True
        elif text in _TRAINING:
            training = True
        elif lowered not in _MARKERS:
            imports.append((start, end))
        if _may_hide(lowered, text):
            risky.append((start, end))
    for start, end in risky:  # rare: e.g. `triton` could hide the `noqa` of `tritonoqa`
        around = data[start + 1:end + _LONGEST]
        directive = directive or any(w in around.lower() for w in _DIRECTIVES)
        training = training or any(w in around for w in _TRAINING)
    return FileWords(tuple(starts), directive, training, tuple(imports))


_HIDING: dict[bytes, bool] = {}


def _may_hide(lowered: bytes, text: bytes) -> bool:
    """Whether a directive or training word can start inside a match of `text` (past its first byte)."""
    known = _HIDING.get(text)
    if known is None:
        if len(_HIDING) >= 4096:  # bounded: an import line's spacing, a word's case make new texts
            _HIDING.clear()
        known = _HIDING[text] = any(
            any(w.startswith(lowered[i:]) or lowered[i:].startswith(w) for w in _DIRECTIVES)
            or any(w.startswith(text[i:]) or text[i:].startswith(w) for w in _TRAINING)
            for i in range(1, len(text)))
    return known
