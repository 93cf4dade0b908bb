"""One pass over a file's bytes for any of several fixed words (the scan's prefilter, directive and marker words).

With google-re2 (installed through `pathspec[re2]`) the words are one automaton run in Latin-1 mode, a byte per
character, so a word matches exactly where `bytes.find` finds it, and ignoring case folds ASCII letters only: one
pass costs about what one C substring search costs, where the searches cost one pass per word. Without RE2 the
searches stand in (`bytes.find`, on the bytes ASCII-lowered when case is ignored).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any


class WordSet:
    """Fixed ASCII words searched for in bytes."""

    def __init__(self, words: Iterable[bytes], ignore_case: bool = False) -> None:
        self.words = tuple(words)
        self.ignore_case = ignore_case
        self._searched = tuple(w.lower() for w in self.words) if ignore_case else self.words
        self._automaton: Any = None
        self._built = False

    @property
    def automaton(self) -> Any:
        """The compiled RE2 pattern, None without RE2 (compiled on first use: RE2 is imported by then anyway)."""
        if not self._built:
            self._built = True
            self._automaton = byte_automaton(b"|".join(re.escape(w) for w in self.words), self.ignore_case)
        return self._automaton

    def found_in(self, data: bytes) -> bool:
        """Whether any word occurs in `data`."""
        automaton = self.automaton
        if automaton is not None:
            return automaton.search(data) is not None
        data = data.lower() if self.ignore_case else data
        return any(word in data for word in self._searched)

    def starts(self, data: bytes) -> list[int]:
        """Where words start in `data`, in order; overlapping occurrences may be left out, never a line that holds one
        (no word holds a line break)."""
        automaton = self.automaton
        if automaton is not None:
            return [m.start() for m in automaton.finditer(data)]
        data = data.lower() if self.ignore_case else data
        found: list[int] = []
        for word in self._searched:
            at = data.find(word)
            while at >= 0:
                found.append(at)
                at = data.find(word, at + 1)
        return sorted(found)


def byte_automaton(pattern: bytes, ignore_case: bool = False, capture: bool = False) -> Any:
    """`pattern` compiled by RE2 for bytes (Latin-1: a byte per character), None without RE2."""
    try:
        import re2  # type: ignore[import-untyped]
    except ImportError:  # pragma: no cover - a dependency: the callers' own searches stand in
        return None
    options = re2.Options()
    options.encoding = re2.Options.Encoding.LATIN1
    options.case_sensitive = not ignore_case
    options.never_capture = not capture
    return re2.compile(pattern, options)
