"""Where a function is bound by name: every loaded module attribute that is that very object.

Our op wrappers replace a function at each of these places (``from torch.nn.functional import gelu`` binds
it in the user's module too), so a call by any name goes through the wrapper.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from types import ModuleType


def bindings(fn: object) -> Iterator[tuple[ModuleType, str]]:
    """(module, attribute name) for each loaded module attribute that is ``fn``."""
    for module in list(sys.modules.values()):
        try:
            names = [k for k, v in vars(module).items() if v is fn]
        except TypeError:  # an object in sys.modules without a __dict__
            continue
        for name in names:
            yield module, name
