"""The portable target's device helpers live in one module per migrated tree, `_migrate_runtime.py`,
which the fix writes (inside its transaction) and the migrated files import.

Where it goes and how a file imports it (also in docs/architecture-notes.md):
- a file in a plain folder (no `__init__.py`: scripts, flat repositories such as nanoGPT) imports
  `from _migrate_runtime import ...`, the module sitting in that folder: Python puts a script's own
  folder first on `sys.path`, so this works from any working directory;
- a module inside a package imports it relatively, `from .._migrate_runtime import ...`, from the
  package's top folder: that works wherever the package is imported from (installed, vendored, `-m`);
- a package module that is also a script (`if __name__ == "__main__":`), where a relative import
  fails when it is run by path, imports it by its package: `from pkg._migrate_runtime import ...`
  (as its own absolute imports of the package do);
- notebooks keep the helpers inline, as does every file whose module location holds a file of that
  name that the fix did not write (a user's own module is never replaced).
The module is the exact text of `migrator/runtime_helpers/device.py`.
"""

from __future__ import annotations

import hashlib
import stat
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


def location(root: Path, rel: str, is_script: bool) -> RuntimeImport | None:
    """Where the module for the file `rel` goes and how the file imports it; None: inline helpers
    (a script in a package whose folder name is no Python name)."""
    folder = PurePosixPath(rel).parent
    if not _is_package(root / folder):
        return RuntimeImport((folder / MODULE_FILE).as_posix(), 0)
    top, level = folder, 1
    while top != PurePosixPath(".") and _is_package(root / top.parent):
        top, level = top.parent, level + 1
    path = (top / MODULE_FILE).as_posix()
    if is_script:
        package = top.name if top != PurePosixPath(".") else root.resolve().name
        return RuntimeImport(path, 0, f"{package}.{MODULE_NAME}") if package.isidentifier() else None
    return RuntimeImport(path, level)


@dataclass
class Planner:
    """Decides per file whether it may import the tree's module, and which modules to write."""

    root: Path
    recorded: dict[str, str]  # path -> sha256 of runtime modules earlier runs wrote (the ledger)
    _state: dict[str, ModuleWrite | bool] = field(default_factory=dict)  # path -> to write | usable as is
    used: set[str] = field(default_factory=set)

    def locate(self, rel: str, is_script: bool) -> RuntimeImport | None:
        where = location(self.root, rel, is_script)
        if where is None:
            return None
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
