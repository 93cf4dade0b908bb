"""Git-style globs from files we did not write (`.gitignore`, `exclude`, `per-file-ignores`), matched in
linear time.

pathspec turns each pattern into a regular expression; with Python's backtracking `re` a pattern like
`a*a*…a*b` takes time exponential in the name's length (20 stars: 4.7 s for a 28-character name,
hours for 40). pathspec matches with RE2 (linear time) when `google-re2` is installed, which this
package requires; where it is missing, a pattern with more than :data:`MAX_STARS` stars in one path
segment is refused instead. An invalid pattern (`[z-a]`) is named: :class:`GlobError`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from functools import lru_cache
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pathspec

MAX_STARS = 3  # per segment, only without RE2: k stars cost up to n^k steps on an n-character name


class GlobError(ValueError):
    """A pattern that cannot be used; the message names the pattern and why."""


@lru_cache(maxsize=1)
def linear_backend() -> str | None:
    import importlib.util

    return "re2" if importlib.util.find_spec("re2") is not None else None


def check_pattern(pattern: str) -> None:
    """GlobError when ``pattern`` is invalid, or too costly without RE2."""
    import pathspec  # here: a scan with no glob to compile (no excludes, no .gitignore walked) never needs it

    try:
        pathspec.GitIgnoreSpec.from_lines([pattern])
    except (re.error, ValueError, TypeError) as exc:
        raise GlobError(f"{pattern!r} is not a valid glob ({exc})") from None
    if linear_backend() is None and any(segment.count("*") > MAX_STARS for segment in pattern.split("/")):
        raise GlobError(f"{pattern!r} has more than {MAX_STARS} '*' in one path segment (without the RE2 "
                        "matcher, google-re2, such a pattern can take hours to match one name)")


def compile_globs(patterns: Iterable[str], strict: bool = True) -> tuple[pathspec.GitIgnoreSpec, list[str]]:
    """(spec, problems): every usable pattern compiled; ``strict`` raises the first GlobError, otherwise
    a bad pattern is left out (git too lets a pattern that cannot match match nothing) and named in
    ``problems``."""
    kept, problems = [], []
    for pattern in patterns:
        stripped = pattern.strip()
        if stripped and not stripped.startswith("#"):
            try:
                check_pattern(pattern)
            except GlobError as exc:
                if strict:
                    raise
                problems.append(str(exc))
                continue
        kept.append(pattern)
    import pathspec

    return pathspec.GitIgnoreSpec.from_lines(kept, backend=linear_backend()), problems
