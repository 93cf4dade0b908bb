"""What makes a module an entry point, for the fix and the MindSpeed route: a `__main__` guard, and for the
route's adaptor, a Megatron import (the adaptor goes below that script's module-level `import torch`)."""

from __future__ import annotations

import re

MAIN_GUARD = re.compile(r"^if\s+__name__\s*==\s*['\"]__main__['\"]\s*:", re.MULTILINE)
IMPORTS_MEGATRON = re.compile(r"^[ \t]*(?:from|import)[ \t]+megatron\b", re.MULTILINE)


def takes_adaptor(text: str) -> bool:
    """A Megatron training script: the MindSpeed route anchors its adaptor at its `import torch`."""
    return bool(MAIN_GUARD.search(text) and IMPORTS_MEGATRON.search(text))
