"""Each side imports its own tree and nothing of the other's (issue 37 item 1).

A repository laid out like minGPT (a package at the root, the training script in ``projects/x/``) runs
only with the package importable: ``pip install -e .``, a ``.pth`` file or ``PYTHONPATH``. All of those
point at the ORIGINAL tree, so the migrated side would silently import the original package and a
broken port would pass. :func:`isolate` is installed before the program runs:

* ``sys.path`` entries inside the other tree are mapped to the same folder of this tree (dropped when
  this tree has no such folder);
* a top-level name this tree defines at its root or in ``src/`` (a regular package or a module, not a
  standard-library name) is served from this tree, whatever else is on the path (the layouts that
  need ``pip install -e .`` or ``PYTHONPATH`` run as they do once installed);
* a module another finder (an editable install's import hook) would load from the other tree is
  loaded from this tree's copy at the same relative place, or refused with an ``ImportError`` that
  names both paths when this tree has none.

:meth:`TreeIsolation.report` lists what was served from where and every module whose file still lies
in the other tree (a namespace package spanning both, say): the parent refuses such a run (exit 2).
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import os
import sys
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Sequence
    from importlib.machinery import ModuleSpec
    from types import ModuleType

SOURCE_ROOTS = ("", "src")  # folders of a tree whose top-level names are the tree's own
MAX_LISTED = 40  # names of own modules kept in the report


def _real(path: str) -> str:
    return os.path.realpath(path)


def _inside(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip(os.sep) + os.sep)


def own_names(tree: str) -> dict[str, str]:
    """Top-level importable names the tree defines at its root or in ``src/`` -> the folder holding them."""
    names: dict[str, str] = {}
    stdlib = sys.stdlib_module_names
    for sub in SOURCE_ROOTS:
        folder = os.path.join(tree, sub) if sub else tree
        try:
            entries = sorted(os.scandir(folder), key=lambda e: e.name)
        except OSError:
            continue
        for entry in entries:
            name = entry.name[:-3] if entry.name.endswith(".py") else entry.name
            if not name.isidentifier() or name in stdlib or name in names:
                continue
            is_module = entry.name.endswith(".py") and entry.is_file()
            is_package = entry.is_dir() and os.path.isfile(os.path.join(entry.path, "__init__.py"))
            if is_module or is_package:
                names[name] = folder
    return names


class TreeIsolation(importlib.abc.MetaPathFinder):
    """The meta-path finder of one side: its own tree wins, the other tree is never imported from."""

    def __init__(self, tree: str, other: str) -> None:
        self.tree, self.other = _real(tree), _real(other)
        self.own = own_names(self.tree)
        self.served: dict[str, str] = {}  # top-level name -> file, served from this tree by name
        self.redirected: list[dict[str, str]] = []  # other tree's place -> this tree's copy
        self.refused: list[dict[str, str]] = []
        self._busy = False

    # -- sys.path ------------------------------------------------------------------------------
    def map_path(self, entries: Sequence[str]) -> list[str]:
        """``entries`` with every folder inside the other tree replaced by this tree's same folder."""
        out: list[str] = []
        for entry in entries:
            real = _real(entry) if entry else entry
            if entry and self.side_of(real) == "other":
                mine = os.path.join(self.tree, os.path.relpath(real, self.other))
                self.redirected.append({"module": "(sys.path)", "path": real,
                                        "own": mine if os.path.isdir(mine) else ""})
                if not os.path.isdir(mine):
                    continue
                entry = mine
            if entry not in out:
                out.append(entry)
        return out

    # -- imports -------------------------------------------------------------------------------
    def side_of(self, real: str) -> str | None:
        """"own", "other" or None for a resolved path (the deeper tree wins when one holds the other)."""
        found = [(len(root), side) for root, side in ((self.tree, "own"), (self.other, "other")) if _inside(real, root)]
        return max(found)[1] if found else None

    def find_spec(self, fullname: str, path: Sequence[str] | None = None,
                  target: ModuleType | None = None) -> ModuleSpec | None:
        if "." in fullname or self._busy:
            return None  # submodules follow their package's own __path__
        spec = self._from_others(fullname, target)
        where = _spec_place(spec)
        side = self.side_of(where) if where else None
        if spec is not None and side == "own":
            return spec  # the path order found this tree's module: as the program would run
        folder = self.own.get(fullname)
        if folder is not None:  # this tree defines the name: its copy, not the other's or an installed one
            mine = importlib.machinery.PathFinder.find_spec(fullname, [folder])
            if mine is not None:
                self.served[fullname] = _spec_place(mine) or folder
                return mine
        if spec is None or where is None or side != "other":
            return spec
        return self._mapped(fullname, spec, where)

    def _from_others(self, fullname: str, target: ModuleType | None) -> ModuleSpec | None:
        """What the finders after this one would load."""
        self._busy = True
        try:
            for finder in [f for f in sys.meta_path if f is not self]:
                find = getattr(finder, "find_spec", None)
                spec = find(fullname, None, target) if find is not None else None
                if spec is not None:
                    return spec
            return None
        finally:
            self._busy = False

    def _mapped(self, fullname: str, spec: ModuleSpec, where: str) -> ModuleSpec:
        """This tree's copy of a module the other finders would load from the other tree, or a refusal."""
        place = os.path.dirname(where)  # the folder holding the module file, or the package's own folder
        if spec.submodule_search_locations is not None and os.path.basename(where).startswith("__init__."):
            place = os.path.dirname(place)
        parent = os.path.join(self.tree, os.path.relpath(place, self.other))
        mine = importlib.machinery.PathFinder.find_spec(fullname, [parent]) if os.path.isdir(parent) else None
        if mine is None:
            self.refused.append({"module": fullname, "path": where, "own": ""})
            raise ImportError(f"{fullname} would be imported from the other side's tree ({where}) and this "
                              f"tree ({self.tree}) has no copy at {parent}", name=fullname)
        self.redirected.append({"module": fullname, "path": where, "own": _spec_place(mine) or parent})
        return mine

    # -- what happened -------------------------------------------------------------------------
    def report(self) -> dict[str, Any]:
        """The provenance facts of this run (``records.Provenance``)."""
        foreign = list(self.refused)
        own: list[str] = []
        real_file = _RealFiles()
        for name, module in list(sys.modules.items()):
            file = getattr(module, "__file__", None)
            if not isinstance(file, str):
                continue
            side = self.side_of(real_file(file))
            if side == "own":
                if "." not in name and name != "__main__":
                    own.append(name)
            elif side == "other":
                foreign.append({"module": name, "path": real_file(file), "own": ""})
        return {"tree": self.tree, "other": self.other, "own_modules": tuple(sorted(own)[:MAX_LISTED]),
                "served": tuple(sorted(self.served)), "redirected": tuple(self.redirected),
                "foreign": tuple(foreign)}


class _RealFiles:
    """``os.path.realpath`` of module files, each folder resolved and listed once: a child holds ~2,100 module
    files from ~310 folders (torch, inductor, the harness), and resolving each file component by component was
    3.5 % of the test suite's CPU."""

    def __init__(self) -> None:
        self.folders: dict[str, tuple[str, frozenset[str] | None]] = {}  # folder -> (real, its linked names)

    def __call__(self, file: str) -> str:
        folder, name = os.path.split(file)
        known = self.folders.get(folder)
        if known is None:
            known = self.folders[folder] = (_real(folder), _linked_names(folder))
        real, linked = known
        path = os.path.join(real, name)
        is_link = name in linked if linked is not None else os.path.islink(path)
        return _real(path) if is_link else path


def _linked_names(folder: str) -> frozenset[str] | None:
    """The names of the symbolic links in ``folder`` (one listing, not a ``stat`` per file); None if unlistable."""
    try:
        with os.scandir(folder or os.curdir) as entries:
            return frozenset(entry.name for entry in entries if entry.is_symlink())
    except OSError:
        return None


def _spec_place(spec: ModuleSpec | None) -> str | None:
    """The file (or package folder) a spec loads, resolved; None for built-ins and namespace packages."""
    if spec is None:
        return None
    if spec.origin and spec.origin not in ("built-in", "frozen") and os.path.isabs(spec.origin):
        return _real(spec.origin)
    locations = list(spec.submodule_search_locations or [])
    return _real(locations[0]) if len(locations) == 1 else None


def isolate(tree: str, other: str) -> TreeIsolation:
    """Install the isolation of ``tree`` from ``other`` in this process (first on ``sys.meta_path``)."""
    finder = TreeIsolation(tree, other)
    sys.path[:] = finder.map_path(sys.path)
    sys.meta_path.insert(0, finder)
    importlib.invalidate_caches()
    return finder
