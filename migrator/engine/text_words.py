"""Which of several fixed words a module's text holds, in one pass: the passes after the checker's traversal ask
about a dozen words each module (their gates), where a substring search per word reads the text once per word."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any


class WordsPresent:
    """Fixed ASCII words; called with a text, the set of those it holds (`{w for w in words if w in text}`).

    With google-re2 the words are one RE2 set run over the text's UTF-8 bytes in Latin-1 mode (a byte per
    character): an ASCII word's bytes occur there exactly where the word occurs in the text, as no other
    character's UTF-8 bytes are ASCII. Without RE2 the substring searches stand in."""

    def __init__(self, words: Iterable[str]) -> None:
        self.words = tuple(dict.fromkeys(words))
        if not all(word.isascii() and word for word in self.words):
            raise ValueError("WordsPresent: every word must be non-empty ASCII")
        self._matcher: Any = None
        self._built = False

    def matcher(self) -> Any:
        """The compiled RE2 set, None without RE2 (built on first use)."""
        if not self._built:
            self._built = True
            try:
                import re2  # type: ignore[import-untyped]
            except ImportError:  # pragma: no cover - a dependency: the substring searches stand in
                return None
            options = re2.Options()
            options.encoding = re2.Options.Encoding.LATIN1
            options.never_capture = True
            found = re2.Set.SearchSet(options)
            for word in self.words:
                found.Add(re2.escape(word.encode("ascii")))
            found.Compile()
            self._matcher = found
        return self._matcher

    def __call__(self, text: str) -> frozenset[str]:
        matcher = self.matcher()
        if matcher is None:
            return frozenset(word for word in self.words if word in text)
        try:
            data = text.encode()
        except UnicodeEncodeError:  # a lone surrogate (a file decoded with `surrogateescape`)
            data = text.encode("utf-8", "surrogatepass")
        indices = matcher.Match(data)
        return frozenset(self.words[i] for i in indices) if indices else frozenset()
