"""CPU emulation of ``torch_npu`` for validating migrated code without Ascend hardware.

THIS IS AN EMULATION, NOT HUAWEI'S torch_npu. It exists so that ``migrate validate`` can run code
produced by the rewriter (``import torch_npu``, ``.npu()``, ``device="npu"``, ``hccl``,
``torch_npu.npu_fusion_attention``, ``torch_npu.optim.NpuFusedAdamW`` …) on a CPU-only box and
compare its numbers with the original (numerics.md §3). Every emulated object says so:
``torch_npu.__emulated__ is True``, ``torch_npu.__version__`` ends in ``+emulated``,
``torch.npu.get_device_name()`` is ``"Ascend (emulated on CPU)"``.

Usage::

    from migrator.validation.child import npu_emulation
    info = npu_emulation.install()      # registers sys.modules["torch_npu"], torch.npu, remaps
    ...                                 # run migrated code
    npu_emulation.uninstall()           # puts torch back exactly as it was

    with npu_emulation.emulated():      # same, scoped
        ...

What ``install()`` does (when the real torch_npu is not importable):

* registers modules ``torch_npu``, ``torch_npu.npu`` (= ``torch.npu``), ``torch_npu.npu.amp``
  (= ``torch.npu.amp``), ``torch_npu.optim``, ``torch_npu.utils`` in ``sys.modules``, each with a
  ``ModuleSpec`` (so ``importlib.util.find_spec("torch_npu")`` works, as transformers' availability
  check needs) and a ``__getattr__`` that names anything not emulated;
* custom ops ``npu_fusion_attention``, ``npu_rms_norm``, ``npu_add_rms_norm``, ``npu_rotary_mul``,
  ``npu_swiglu`` (ascend-facts §c.1, §c.3) and fused optimizers (§d);
* the device remap npu → cpu by wrapping the Python callables that transfer_to_npu wraps
  (§b.2), hccl → gloo (§b.3), ``torch.autocast("npu")`` → cpu; see :mod:`.remap` for why callables
  are wrapped instead of ``torch.utils.rename_privateuse1_backend``.

``torch.device("npu")`` / ``torch.device("npu:1")`` return a real ``torch.device("cpu")`` (index
dropped), so ``tensor.device.type`` is ``"cpu"`` and code that tests ``device.type == "npu"``
takes its non-NPU branch; ``torch.npu.set_device(i)``/``current_device()`` keep the index.

Limitations: objects bound before ``install()`` (``from torch import zeros``) are not remapped;
``torch.UntypedStorage(..., device="npu")`` and TorchScript annotations using ``torch.device``
are not handled; ``torch.ops.npu.*`` are not registered; numerics are CPU numerics (see
:mod:`.attention` and :mod:`.ops` for precision notes); memory statistics are stubs.
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.machinery
import importlib.util
import sys
import types
from collections.abc import Iterator
from typing import Any, TypedDict

import torch

from . import amp as _amp
from . import attention as _attention
from . import npu as _npu
from . import ops as _ops
from . import optim as _optim
from . import remap as _remap
from ._patch import PatchSet

EMULATION_LABEL = "torch_npu emulation (pure PyTorch on CPU) - not Huawei's torch_npu, no Ascend hardware"

#: Custom ops exported as ``torch_npu.<name>`` (ascend-facts §c).
CUSTOM_OPS = {
    "npu_fusion_attention": _attention.npu_fusion_attention,
    "npu_rms_norm": _ops.npu_rms_norm,
    "npu_add_rms_norm": _ops.npu_add_rms_norm,
    "npu_rotary_mul": _ops.npu_rotary_mul,
    "npu_swiglu": _ops.npu_swiglu,
    "npu_format_cast": _ops.npu_format_cast,
    "get_npu_format": _ops.get_npu_format,
}

_MODULE_NAMES = ("torch_npu", "torch_npu.npu", "torch_npu.npu.amp", "torch_npu.optim", "torch_npu.utils",
                 "torch.npu", "torch.npu.amp")


class _Installation:
    def __init__(self) -> None:
        self.patches: PatchSet | None = None
        self.modules: dict[str, types.ModuleType] = {}


_INSTALLATION = _Installation()


def _not_emulated(module_name: str):
    def __getattr__(name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        raise AttributeError(
            f"module '{module_name}' has no attribute '{name}': it is not part of the torch_npu emulation "
            f"({EMULATION_LABEL}). Emulated: see migrator.validation.child.npu_emulation.")

    return __getattr__


def _new_module(name: str, doc: str, attrs: dict[str, Any], package: bool = False) -> types.ModuleType:
    module = types.ModuleType(name, doc)
    module.__spec__ = importlib.machinery.ModuleSpec(name, loader=None, origin="npu-emulation",
                                                     is_package=package)
    module.__loader__ = None
    module.__package__ = name if package else name.rpartition(".")[0]
    if package:
        module.__path__ = []
    module.__emulated__ = True  # type: ignore[attr-defined]
    for key, value in attrs.items():
        setattr(module, key, value)
    module.__getattr__ = _not_emulated(name)  # type: ignore[method-assign]
    return module


def _torch_base_version() -> str:
    return torch.__version__.split("+")[0]


def build_modules() -> dict[str, types.ModuleType]:
    """Build fresh emulated module objects (ascend-facts §a: what ``import torch_npu`` provides)."""
    amp_mod = _new_module("torch_npu.npu.amp", f"{EMULATION_LABEL}: torch_npu.npu.amp.",
                          {n: getattr(_amp, n) for n in _amp.__all__} | {"__all__": list(_amp.__all__)},
                          package=False)
    npu_attrs = {n: getattr(_npu, n) for n in _npu.NPU_ALL}
    npu_attrs.update(amp=amp_mod, __all__=list(_npu.NPU_ALL) + ["amp"])
    npu_mod = _new_module("torch_npu.npu", f"{EMULATION_LABEL}: torch_npu.npu (also torch.npu).\n\n"
                          + (_npu.__doc__ or ""), npu_attrs, package=True)
    optim_mod = _new_module("torch_npu.optim", f"{EMULATION_LABEL}: torch_npu.optim.",
                            {n: getattr(_optim, n) for n in _optim.__all__} | {"__all__": list(_optim.__all__)})
    utils_mod = _new_module("torch_npu.utils", f"{EMULATION_LABEL}: torch_npu.utils (minimal).",
                            {"__all__": []}, package=True)
    top_attrs: dict[str, Any] = dict(CUSTOM_OPS)
    top_attrs.update(
        npu=npu_mod, optim=optim_mod, utils=utils_mod,
        __version__=f"{_torch_base_version()}+emulated",
        EMULATION_LABEL=EMULATION_LABEL,
        __all__=sorted(CUSTOM_OPS),
    )
    top = _new_module("torch_npu", f"{EMULATION_LABEL}.\n\n{__doc__}", top_attrs, package=True)
    return {"torch_npu": top, "torch_npu.npu": npu_mod, "torch_npu.npu.amp": amp_mod,
            "torch_npu.optim": optim_mod, "torch_npu.utils": utils_mod}


def is_installed() -> bool:
    """True while the emulation is installed (ascend-facts §a: the module ``import torch_npu`` yields)."""
    return _INSTALLATION.patches is not None


def real_torch_npu() -> tuple[bool, str | None]:
    """(importable, error): is a real torch_npu present and importable? (ascend-facts §a)."""
    existing = sys.modules.get("torch_npu")
    if existing is not None:
        return not getattr(existing, "__emulated__", False), None
    try:
        spec = importlib.util.find_spec("torch_npu")
    except (ImportError, ValueError):
        spec = None
    if spec is None:
        return False, None
    before = set(sys.modules)
    try:
        importlib.import_module("torch_npu")
        return True, None
    except Exception as exc:  # ImportError: libhccl.so missing (no CANN), RuntimeError, …
        for name in set(sys.modules) - before:
            if name == "torch_npu" or name.startswith("torch_npu."):
                sys.modules.pop(name, None)
        return False, f"{type(exc).__name__}: {exc}"


class _InstallCore(TypedDict):
    emulated: bool
    installed_now: bool
    already_installed: bool
    real_torch_npu: bool
    real_import_error: str | None
    label: str
    patched: list[str]


class InstallInfo(_InstallCore, total=False):
    """What :func:`install` did (keys in the order a side's status records them)."""

    message: str


def install(*, force: bool = False, amp_dtype: torch.dtype = torch.float16, device_count: int = 1) -> InstallInfo:
    """Install the CPU emulation of torch_npu (ascend-facts §a, §b, §c, §d). Idempotent.

    If a real ``torch_npu`` is importable (and ``force`` is False) nothing is changed and the result
    says so. Otherwise the emulated modules are registered and torch is patched (see the module
    docstring). ``amp_dtype`` is the default dtype of ``torch.npu.amp.autocast()`` (real torch_npu:
    fp16, and so here: a program's policy is never substituted); ``device_count`` is what
    ``torch.npu.device_count()`` reports.

    Returns an :class:`InstallInfo`: ``emulated`` (emulation active after the call), ``installed_now``,
    ``already_installed``, ``real_torch_npu`` (a real one is importable), ``real_import_error``
    (why a present torch_npu could not be imported), ``label``, ``message``, ``patched`` (names).
    """
    result: InstallInfo = {"emulated": False, "installed_now": False, "already_installed": False,
                              "real_torch_npu": False, "real_import_error": None, "label": EMULATION_LABEL,
                              "patched": []}
    if is_installed():
        result.update({"emulated": True, "already_installed": True,
                       "patched": list(_INSTALLATION.patches.names),  # type: ignore[union-attr]
                       "message": "torch_npu emulation already installed"})
        return result
    if not force:
        real, error = real_torch_npu()
        if real:
            result.update({"real_torch_npu": True,
                           "message": "a real torch_npu is importable; emulation NOT installed, nothing changed"})
            return result
        result["real_import_error"] = error

    _npu.STATE.__init__()  # type: ignore[misc]  # reset the singleton in place
    _npu.STATE.amp_dtype = amp_dtype
    _npu.STATE.device_count = int(device_count)
    modules = build_modules()
    patches = PatchSet()
    try:
        for name, module in modules.items():
            patches.add_module(name, module)
        patches.add_module("torch.npu", modules["torch_npu.npu"])
        patches.add_module("torch.npu.amp", modules["torch_npu.npu.amp"])
        patches.setattr(torch, "npu", modules["torch_npu.npu"], "torch.npu")
        _remap.apply(patches, modules["torch_npu.npu"], _npu.Stream)
    except BaseException:
        patches.restore()
        raise
    _INSTALLATION.patches = patches
    _INSTALLATION.modules = modules
    message = "torch_npu emulation installed (CPU; npu->cpu, hccl->gloo)"
    if result["real_import_error"]:
        message += f"; a torch_npu package is present but not importable: {result['real_import_error']}"
    result.update({"emulated": True, "installed_now": True, "patched": list(patches.names), "message": message})
    return result


def uninstall() -> dict[str, Any]:
    """Remove the emulation (undo of :func:`install`, ascend-facts §a/§b): restore every patched torch
    attribute and ``sys.modules`` entry, and the post-import hooks."""
    patches = _INSTALLATION.patches
    if patches is None:
        return {"uninstalled": False, "message": "torch_npu emulation was not installed"}
    patches.restore()
    _INSTALLATION.patches = None
    _INSTALLATION.modules = {}
    _npu.STATE.__init__()  # type: ignore[misc]  # reset the singleton in place
    return {"uninstalled": True, "message": "torch_npu emulation removed; torch restored"}


@contextlib.contextmanager
def emulated(**kwargs: Any) -> Iterator[InstallInfo]:
    """Context manager around :func:`install`/:func:`uninstall` (ascend-facts §a): installs on entry and
    uninstalls on exit if this call installed it."""
    info = install(**kwargs)
    try:
        yield info
    finally:
        if info.get("installed_now"):
            uninstall()


__all__ = ["install", "uninstall", "is_installed", "emulated", "build_modules", "EMULATION_LABEL", "CUSTOM_OPS"]
