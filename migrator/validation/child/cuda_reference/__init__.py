"""Pure-PyTorch CPU references for CUDA-only libraries, so ORIGINAL CUDA programs run on CPU.

The subpackages mirror the public layout of ``flash_attn``, ``apex`` and ``xformers`` closely
enough for the usual imports (``from flash_attn import flash_attn_func``,
``from apex.optimizers import FusedAdam``, ``xformers.ops.memory_efficient_attention``). Each is
written from the library's documented formula; module docstrings say where the reference
deliberately differs (e.g. fp32 accepted by flash_attn, torch RNG for dropout).

``install()`` aliases them to the top-level names in ``sys.modules``, only for packages that do
not import, and says which it installed so a validation result can report "reference used".
Nothing here needs CUDA; ``device_remap`` (CUDA runtime calls -> CPU) is separate.
"""

from __future__ import annotations

import importlib
import importlib.util
import pkgutil
import sys
from types import ModuleType

__all__ = ["REFERENCE_PACKAGES", "install", "uninstall", "active"]

# top-level package name -> our subpackage
REFERENCE_PACKAGES = {
    "flash_attn": f"{__name__}.flash_attn",
    "apex": f"{__name__}.apex",
    "xformers": f"{__name__}.xformers",
}


def _is_reference(mod: ModuleType | None) -> bool:
    return bool(getattr(mod, "__cuda_reference__", False))


def _importable(name: str) -> bool:
    """True if the real package imports. A package that is present but fails to import (e.g. its
    CUDA extension cannot load on a CPU box) counts as absent."""
    if importlib.util.find_spec(name) is None:
        return False
    before = set(sys.modules)
    try:
        importlib.import_module(name)
        return True
    except Exception:  # ImportError, OSError from a missing .so, RuntimeError from CUDA init
        for key in set(sys.modules) - before:  # drop half-imported leftovers
            del sys.modules[key]
        return False


def _walk(pkg_name: str) -> dict[str, ModuleType]:
    """Import our subpackage and all its submodules; returns {suffix: module} ('' = package)."""
    pkg = importlib.import_module(pkg_name)
    mods = {"": pkg}
    for info in pkgutil.walk_packages(pkg.__path__, prefix=pkg_name + "."):
        mods[info.name[len(pkg_name):]] = importlib.import_module(info.name)
    return mods


def install(sys_modules: dict | None = None, names=None, force: bool = False) -> list[str]:
    """Register reference stand-ins under their top-level names; return the names now served by
    a reference (already-installed references count, so calling twice is harmless).

    ``sys_modules``: mapping to register into (default ``sys.modules``; tests pass a dict).
    ``names``: subset of ``REFERENCE_PACKAGES`` (default all). ``force``: install even where the
    real package imports (to validate against the reference instead of the real kernels).
    """
    target = sys.modules if sys_modules is None else sys_modules
    installed = []
    for name in names or REFERENCE_PACKAGES:
        if name not in REFERENCE_PACKAGES:
            raise KeyError(f"no CUDA reference for {name!r}; known: {sorted(REFERENCE_PACKAGES)}")
        if _is_reference(target.get(name)):
            installed.append(name)
            continue
        if not force and (name in target or _importable(name)):
            continue  # the real package is there: leave it alone
        for suffix, mod in _walk(REFERENCE_PACKAGES[name]).items():
            target[name + suffix] = mod
        installed.append(name)
    return installed


def uninstall(sys_modules: dict | None = None) -> list[str]:
    """Remove the top-level aliases that ``install`` registered; returns the names removed."""
    target = sys.modules if sys_modules is None else sys_modules
    removed = []
    for name in REFERENCE_PACKAGES:
        if not _is_reference(target.get(name)):
            continue
        for key in [k for k in target if k == name or k.startswith(name + ".")]:
            del target[key]
        removed.append(name)
    return removed


def active(sys_modules: dict | None = None) -> list[str]:
    """Names whose top-level module is currently one of our references."""
    target = sys.modules if sys_modules is None else sys_modules
    return [n for n in REFERENCE_PACKAGES if _is_reference(target.get(n))]
