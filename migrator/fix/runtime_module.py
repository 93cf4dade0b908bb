"""The portable target's device helpers live in one module per migrated tree, `_migrate_runtime.py`,
which the fix writes (inside its transaction) and the migrated files import.

Where it goes and how a file imports it (also in docs/architecture-notes.md), so that the file runs
however it ran before: by path, with `-m`, imported from another package or a notebook:
- a file at the root of a tree that is no package (scripts, flat repositories such as nanoGPT) imports
  `from _migrate_runtime import ...`, the module sitting beside it: Python puts a script's own folder
  first on `sys.path` (`python train.py`, `python -m train`), and so does a notebook or a sibling;
- every other file (a package module, or a file in a plain sub-folder) imports it relatively, from the
  top folder of its package (or its own plain folder), inside `try`; where Python knows no parent
  package (run by path, `python ext/tool/run.py`, or imported as a top-level module) the `except
  ImportError` branch loads that same file by its location, found from `__file__`. No package name
  is used (a vendored, renamed or third-party package of the same name cannot be picked up instead),
  and `sys.path` is never edited;
- notebooks keep the helpers inline, as does every file whose module location holds a file of that
  name that the fix did not write (a user's own module is never replaced), and a root-level file when
  another `_migrate_runtime` is importable in this environment.
The module is the exact text of `migrator/fix/runtime_helpers/device.py`.
"""

from __future__ import annotations

import hashlib
import stat
import sys
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from migrator.fix.helper_source import module_text

MODULE_NAME = "_migrate_runtime"
MODULE_FILE = f"{MODULE_NAME}.py"
# what the module provides: transforms asking for these helpers get an import instead of a copy
PROVIDES = frozenset({"_migrate_device", "_migrate_accelerator_type", "_migrate_backend", "_migrate_device_module"})


def text() -> str:
    return module_text("device")


@dataclass(frozen=True)
class RuntimeImport:
    path: str  # the module, relative to the root (POSIX)
    level: int  # dots of the import: 0 = absolute
    module: str = MODULE_NAME  # what the file imports from (after the dots)


@dataclass(frozen=True)
class ModuleWrite:
    """A runtime module this run writes: new (`before` empty) or an older version the fix wrote."""

    path: str
    before: str
    before_bytes: bytes
    after: str


def _is_package(folder: Path) -> bool:
    return (folder / "__init__.py").is_file()


def location(root: Path, rel: str) -> RuntimeImport:
    """Where the module for the file `rel` goes and how the file imports it: level 0 (plain, absolute)
    for a root-level file of a tree that is no package, else the dots from the file to the module."""
    folder = PurePosixPath(rel).parent
    if not _is_package(root / folder):
        if folder == PurePosixPath("."):
            return RuntimeImport(MODULE_FILE, 0)
        return RuntimeImport((folder / MODULE_FILE).as_posix(), 1)  # a plain sub-folder: beside the file
    top, level = folder, 1
    while top != PurePosixPath(".") and _is_package(root / top.parent):
        top, level = top.parent, level + 1
    return RuntimeImport((top / MODULE_FILE).as_posix(), level)


def importable_elsewhere(root: Path) -> bool:
    """Another `_migrate_runtime` on this environment's import path (outside the tree; the working folder
    and modules already imported are not the environment): a plain import could pick it up instead."""
    import os
    from importlib.machinery import PathFinder

    search = [p for p in sys.path if p not in ("", os.getcwd())]
    try:
        spec = PathFinder.find_spec(MODULE_NAME, search)
    except (ImportError, ValueError):
        return False
    origin = spec.origin if spec is not None else None
    return origin is not None and not Path(origin).resolve().is_relative_to(root.resolve())


@dataclass
class Planner:
    """Decides per file whether it may import the tree's module, and which modules to write."""

    root: Path
    recorded: dict[str, str]  # path -> sha256 of runtime modules earlier runs wrote (the ledger)
    _state: dict[str, ModuleWrite | bool] = field(default_factory=dict)  # path -> to write | usable as is
    used: set[str] = field(default_factory=set)

    def locate(self, rel: str) -> RuntimeImport | None:
        where = location(self.root, rel)
        if where.level == 0 and importable_elsewhere(self.root):
            return None  # `from _migrate_runtime import` could resolve to that one: helpers inline
        if where.path not in self._state:
            self._state[where.path] = self._check(where.path)
        return where if self._state[where.path] is not False else None

    def _check(self, path: str) -> ModuleWrite | bool:
        """True: there, as this version writes it; a ModuleWrite: to be written; False: a file of that
        name that the fix did not write (or that was edited since): never replaced."""
        file = self.root / path
        try:
            mode = file.lstat().st_mode
        except FileNotFoundError:
            return ModuleWrite(path, "", b"", text())
        except OSError:
            return False
        if not stat.S_ISREG(mode):
            return False  # a link, folder or device: left alone
        try:
            data = file.read_bytes()
        except OSError:
            return False
        if data == text().encode("utf-8"):
            return True
        if self.recorded.get(path) == hashlib.sha256(data).hexdigest():
            return ModuleWrite(path, data.decode("utf-8", "replace"), data, text())  # an older version of ours
        return False

    def writes(self) -> list[ModuleWrite]:
        """The modules the files that import one need and that are not there as they should be."""
        return [s for p, s in sorted(self._state.items()) if p in self.used and isinstance(s, ModuleWrite)]
