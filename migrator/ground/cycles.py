"""The cycle collector paused around work that builds a large syntax tree without cycles."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def cycle_collection_paused() -> Iterator[None]:
    """No cycle collection while one file is parsed and checked or fixed: `ast`'s and libcst's trees (a few
    hundred thousand objects, no cycles) stay alive until the file is done, and the collector, run every few
    hundred allocations, walks them for nothing (about a tenth of a parse). Then as it was: what the file
    left is collected by the first collection after it."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


@contextmanager
def earlier_objects_frozen() -> Iterator[None]:
    """The objects alive before the block (modules, the catalogue, the coverage tables) kept out of the collections
    inside it: every full collection walked them again for nothing while a scan's results grew (`gc.freeze`); they
    rejoin the oldest generation after it. Left as it is where something froze objects already (a forked server
    sharing its pages), whose freeze is not ours to undo."""
    if gc.get_freeze_count():
        yield
        return
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()
