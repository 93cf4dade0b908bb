"""The perf lint's census findings in a file's scan: the sites `.migrate/op-trace.json` holds for this
file (`migrator/census/perf_lint.py`: shapes that change between steps, the advisor's AICPU rules),
each under its rule, unless a static perf finding already sits on that line (the source names the
cause there: a `nonzero` is PERF001 once, not also its data-dependent shape and its AICPU guide)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass

CENSUS_IMPLS = ("dynamic-shape", "aicpu-dtype", "aicpu-op")


@dataclass(frozen=True)
class TracedPerf:
    """One census site (the pipeline copies it from the census, which sits above the engine)."""

    impl: str
    path: str  # POSIX, relative to the scan root
    line: int
    symbol: str
    message: str


def traced_hits(sites: Iterable[TracedPerf], rel: str, static_lines: set[int],
                lines: tuple[str, ...]) -> Iterator[tuple[TracedPerf, int, int]]:
    """(site, column, end column) for the census sites of file `rel` on lines without a static perf finding."""
    for site in sites:
        if site.path != rel or site.impl not in CENSUS_IMPLS:
            continue
        if site.line in static_lines or not 1 <= site.line <= len(lines):
            continue  # the source's own finding says it; a line the file no longer has is stale
        text = lines[site.line - 1]
        yield site, len(text) - len(text.lstrip()) + 1, len(text.rstrip()) + 1
