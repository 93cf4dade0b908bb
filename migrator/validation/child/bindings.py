"""Where a function is bound by name: every loaded module attribute that is that very object.

Our op wrappers replace a function at each of these places (``from torch.nn.functional import gelu`` binds
it in the user's module too), so a call by any name goes through the wrapper.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator, Sequence
from types import ModuleType


def bindings(fn: object) -> Iterator[tuple[ModuleType, str]]:
    """(module, attribute name) for each loaded module attribute that is ``fn``."""
    yield from bindings_of((fn,))[0]


def bindings_of(fns: Sequence[object]) -> list[list[tuple[ModuleType, str]]]:
    """For each of ``fns``, in order, :func:`bindings` of it: one pass over the ~2,000 modules torch loads
    for all of them (a module none of them is in is skipped at C speed, by the ids of its values)."""
    wanted = {id(fn) for fn in fns}
    found: list[list[tuple[ModuleType, str]]] = [[] for _ in fns]
    for module in list(sys.modules.values()):
        try:
            namespace = vars(module)
        except TypeError:  # an object in sys.modules without a __dict__
            continue
        values = list(namespace.values())  # the user's threads may bind names meanwhile
        if wanted.isdisjoint(map(id, values)):
            continue
        for name, value in list(namespace.items()):
            for i, fn in enumerate(fns):
                if value is fn:
                    found[i].append((module, name))
    return found
