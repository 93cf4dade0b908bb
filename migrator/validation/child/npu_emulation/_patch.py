"""Reversible attribute patching used by the torch_npu emulation.

Every change the emulation makes to ``torch`` (functions, class attributes, ``sys.modules``
entries) goes through one :class:`PatchSet`, so :func:`uninstall` can put each attribute back
exactly: an attribute that the owner defined itself is restored to the original object, one
that was inherited or absent is deleted again (``torch.Tensor.to`` is inherited from
``torch._C.TensorBase``; after uninstall it must be inherited again, not shadowed).
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

_MISSING = object()


class PatchSet:
    """Records ``setattr``/``sys.modules`` changes and undoes them in reverse order."""

    def __init__(self) -> None:
        self._attrs: list[tuple[Any, str, Any]] = []
        self._modules: list[tuple[str, Any]] = []
        self._undo: list[Callable[[], None]] = []
        self.names: list[str] = []

    def setattr(self, owner: Any, name: str, value: Any, label: str | None = None) -> None:
        """Set ``owner.name = value`` and remember what was there (own attribute or not)."""
        old = owner.__dict__.get(name, _MISSING) if hasattr(owner, "__dict__") else _MISSING
        self._attrs.append((owner, name, old))
        setattr(owner, name, value)
        if label:
            self.names.append(label)

    def add_module(self, name: str, module: Any) -> None:
        """Register ``sys.modules[name] = module`` (restoring any previous entry later)."""
        self._modules.append((name, sys.modules.get(name, _MISSING)))
        sys.modules[name] = module

    def add_undo(self, undo: Callable[[], None]) -> None:
        """Register an extra clean-up callable (run first on restore)."""
        self._undo.append(undo)

    def restore(self) -> None:
        """Undo everything, newest first."""
        for undo in reversed(self._undo):
            undo()
        self._undo.clear()
        for owner, name, old in reversed(self._attrs):
            if old is _MISSING:
                try:
                    delattr(owner, name)
                except AttributeError:
                    pass
            else:
                setattr(owner, name, old)
        for name, old in reversed(self._modules):
            if old is _MISSING:
                sys.modules.pop(name, None)
            else:
                sys.modules[name] = old
        self._attrs.clear()
        self._modules.clear()
        self.names.clear()


class _LoaderProxy:
    """Delegating loader that runs a callback after the module body executed."""

    def __init__(self, loader: Any, callback: Callable[[Any], None]) -> None:
        self._loader = loader
        self._callback = callback

    def create_module(self, spec: Any) -> Any:
        return self._loader.create_module(spec)

    def exec_module(self, module: Any) -> None:
        self._loader.exec_module(module)
        self._callback(module)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._loader, name)


class PostImportHook:
    """``sys.meta_path`` entry that calls ``callback(module)`` once ``fullname`` has been imported.

    Used to patch heavy modules (``torch.distributed.fsdp`` costs about a second to import) only
    if the user's code imports them; :meth:`remove` takes the hook out of ``sys.meta_path``.
    """

    def __init__(self, fullname: str, callback: Callable[[Any], None]) -> None:
        self.fullname = fullname
        self.callback = callback
        self._busy = False

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> Any:
        if fullname != self.fullname or self._busy:
            return None
        import importlib.util

        self._busy = True
        try:
            spec = importlib.util.find_spec(fullname)
        finally:
            self._busy = False
        if spec is None or spec.loader is None:
            return None
        spec.loader = _LoaderProxy(spec.loader, self.callback)  # type: ignore[assignment]  # duck-typed Loader
        return spec

    def install(self) -> None:
        sys.meta_path.insert(0, self)

    def remove(self) -> None:
        if self in sys.meta_path:
            sys.meta_path.remove(self)
