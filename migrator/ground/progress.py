"""The progress callback of long api calls: `progress(phase, done, total)`, e.g. ("scanning", 40, 200).

The api only calls it; `migrator.cli.support.ProgressDisplay` draws it on a terminal. Standard library only.
"""

from __future__ import annotations

from collections.abc import Callable

Progress = Callable[[str, int, int], None]


def phase(progress: Progress | None, name: str) -> Callable[[int, int], None] | None:
    """A `(done, total)` callback (the engine's and the fixer's) that reports as `name`."""
    return (lambda done, total: progress(name, done, total)) if progress else None


def prefixed(progress: Progress | None, prefix: str) -> Progress | None:
    """The same callback with every phase named `prefix + phase` ("re-scanning", "diffs: fixing")."""
    return (lambda name, done, total: progress(prefix + name, done, total)) if progress else None
