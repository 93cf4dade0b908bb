"""The one call our wrappers make into the code they wrap (a ``TorchFunctionMode`` handler calling the op, a
patched ``backward`` or ``GradScaler`` method calling the real one).

Its frame counts as library code for :func:`.errors.harness_frame`: an exception raised by the wrapped
op belongs to whoever called the op (the program), not to the wrapper between them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


def call(func: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    return func(*args, **kwargs)
