"""Running the runtime helper modules (migrator/fix/runtime_helpers/) the way a migrated file holds them."""

from __future__ import annotations

from migrator.fix.helper_source import PACKAGE, module_text


def helper_module(module: str) -> dict:
    """A fresh run of the whole module file (its imports too: `import torch_npu` is the emulation
    while installed); not cached in sys.modules, so each test sees the torch_npu of its moment."""
    namespace: dict = {"__name__": f"{PACKAGE}.{module}"}
    exec(compile(module_text(module), f"{module}.py", "exec"), namespace)
    return namespace
