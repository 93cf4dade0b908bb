"""Load the validation protocol of a tree in a child process, with the right reference layers.

The protocol (``validate.py`` at the tree root, or ``--entry module[:object]``):

* ``make_model(dropout=0.0) -> nn.Module`` (required): the harness turns dropout off only here;
* ``make_batch(step) -> batch`` (required); ``make_batch(step, rank, world_size)`` when the
  program shards its data itself (then S2/EP ranks each get their own batch);
* ``loss_fn(out, batch) -> scalar`` (required);
* ``INPUT_KEYS`` (optional): the model is called as ``model(**{k: batch[k] for k in INPUT_KEYS})``;
  without it a dict batch is passed as keyword arguments, a tuple positionally;
* ``parallelize(model, mesh, stage)`` (optional): ``stage`` in ``dp``, ``fsdp``, ``tp``, ``ep``;
  raises ``ValueError`` for a stage the program does not implement;
* ``sync_grads(model, mesh, stage)`` (optional): what the program does between ``backward()``
  and ``optimizer.step()`` (e.g. expert-parallel grad scaling);
* ``make_optimizer(model)`` (optional): the program's optimizer, compared in isolation and
  through ``TRAIN_STEPS`` real training steps (S1 compares the parameter updates after them);
* ``train_step(model, optimizer, loss, scaler)`` (optional): what the program does from the loss
  to the next step (scaled backward, ``unscale_``, clipping, ``step``, ``update``, ``zero_grad``);
  without it ``loss.backward(); optimizer.step(); optimizer.zero_grad()`` (the optimizer's own
  ``set_to_none`` default: fused optimizers refuse ``True``);
* ``make_scaler()`` (optional): the program's loss scaler (``GradScaler``), passed to ``train_step``.

Reference layers (``install_layers``), only where the real package is absent, and always named in
the result: the ORIGINAL side gets the CUDA-library references (flash_attn / apex / xformers,
:mod:`.cuda_reference`) and, without a GPU, the device remap cuda→cpu, nccl→gloo, ``torch.cuda.*``
→ CPU no-ops (:mod:`.cuda_reference.device_remap`); the MIGRATED side gets the torch_npu emulation
(npu→cpu, hccl→gloo, custom ops; :mod:`.npu_emulation`) unless a real torch_npu imports.
"""

from __future__ import annotations

import importlib
import inspect
import os
import sys
from collections.abc import Callable, MutableMapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch
    from torch.distributed.device_mesh import DeviceMesh

REQUIRED = ("make_model", "make_batch", "loss_fn")


class EntryError(Exception):
    """The protocol cannot be loaded (import error, missing function): exit 2."""


@dataclass
class Entry:
    """The loaded protocol of one tree."""

    source: str
    make_model: Callable[..., torch.nn.Module]
    make_batch: Callable[..., Any]
    loss_fn: Callable[[Any, Any], torch.Tensor]
    parallelize: Callable[[torch.nn.Module, DeviceMesh, str], torch.nn.Module | None] | None = None
    sync_grads: Callable[[torch.nn.Module, DeviceMesh, str], None] | None = None
    make_optimizer: Callable[[torch.nn.Module], torch.optim.Optimizer] | None = None
    train_step: Callable[[torch.nn.Module, torch.optim.Optimizer, torch.Tensor, Any], None] | None = None
    make_scaler: Callable[[], Any] | None = None
    input_keys: tuple[str, ...] | None = None
    batch_takes_rank: bool = False

    def batch(self, step: int, rank: int = 0, world_size: int = 1) -> Any:
        if self.batch_takes_rank:
            return self.make_batch(step, rank, world_size)
        return self.make_batch(step)


@dataclass
class Layers:
    """Which reference layers this process runs under (recorded in the result)."""

    side: str
    device: str
    used: dict[str, str] = field(default_factory=dict)
    backend: str = "gloo"


class DeviceUnavailable(RuntimeError):
    """`--device` asked for a device this process cannot use; the message says why."""


def device_for(side: str, requested: str | None, *, cuda: bool, real_npu: bool, npu_error: str | None = None) -> str:
    """The device of this side: what was requested (refused with the reason when it does not answer),
    else what answers (original: cuda or cpu; migrated: npu with a real torch_npu, else the cpu emulation)."""
    answers = ("cuda" if cuda else "cpu") if side == "original" else ("npu" if real_npu else "cpu")
    if requested is None or requested == answers or requested == "cpu":
        return requested or answers
    if side == "original":
        raise DeviceUnavailable(f"--device {requested}: the original side runs on cuda or cpu"
                                if requested != "cuda" else "--device cuda: torch.cuda.is_available() is False here")
    if requested != "npu":
        raise DeviceUnavailable(f"--device {requested}: the migrated side runs on npu or cpu")
    raise DeviceUnavailable("--device npu: " + (f"torch_npu cannot be imported ({npu_error})" if npu_error
                                                else "torch_npu is not installed"))


def install_layers(side: str, device: str | None = None) -> Layers:
    """Install the reference layers for ``side`` (``original`` or ``migrated``) in this process, on
    ``device`` when one was requested (`--device`), else on what answers."""
    import torch

    if side == "original":
        from . import cuda_reference

        chosen = device_for(side, device, cuda=torch.cuda.is_available(), real_npu=False)
        used = cuda_reference.install()
        layers = Layers(side, chosen)
        if used:
            layers.used["cuda_reference"] = (f"CPU references for {', '.join(used)} "
                                             "(migrator.validation.child.cuda_reference, not the CUDA kernels)")
        if layers.device == "cpu":
            from .cuda_reference import device_remap

            device_remap.install()
            layers.used["device_remap"] = ("cuda->cpu, nccl->gloo, torch.cuda.* -> CPU no-ops "
                                           "(migrator.validation.child.cuda_reference.device_remap)")
            layers.backend = "gloo"
        else:
            layers.backend = "nccl"
        return layers
    if side == "migrated":
        from . import npu_emulation

        if device == "npu":
            real, error = npu_emulation.real_torch_npu()
            device_for(side, device, cuda=False, real_npu=real, npu_error=error)
        info = npu_emulation.install(force=device == "cpu")  # --device cpu: the emulation even beside a torch_npu
        if info.get("real_torch_npu"):
            return Layers(side, "npu", {"torch_npu": "real torch_npu (Ascend)"}, backend="hccl")
        layers = Layers(side, "cpu", backend="hccl")  # the emulation maps hccl -> gloo
        layers.used["npu_emulation"] = npu_emulation.EMULATION_LABEL + "; npu->cpu, hccl->gloo"
        if info.get("real_import_error"):
            layers.used["npu_emulation"] += f" (torch_npu present but not importable: {info['real_import_error']})"
        return layers
    raise ValueError(f"unknown side {side!r}")


def prepare(side: str, tree: str, entry_spec: str | None, status: MutableMapping[str, object], *,
            seed: int | None = None, threads: int | None = None, determinism_device: str | None = None,
            extra: Callable[[Layers], None] | None = None, device: str | None = None) -> tuple[Entry, Layers] | None:
    """Start of every child process: the reference layers for `side`, determinism (when `seed` is
    given), then the protocol entry. Returns (entry, layers); on failure `status` says why (phase
    "entry") and None is returned."""
    from .. import determinism
    from .errors import describe

    try:
        layers = install_layers(side, device)
        status["layers"] = layers.used
        status["device"] = layers.device
        if seed is not None:
            if threads is None:
                raise ValueError("protocol.prepare: seed given without threads")
            status["manifest"] = determinism.apply(seed, threads, determinism_device or layers.device)
        if extra is not None:
            extra(layers)
        return load_entry(tree, entry_spec), layers
    except EntryError as exc:
        status.update(phase="entry", error={"summary": str(exc)})
    except Exception as exc:  # noqa: BLE001 - the user's program may raise anything on import
        status.update(phase="entry", error=describe(exc, tree))
    return None


def _takes_rank(fn: Callable) -> bool:
    try:
        params = [p for p in inspect.signature(fn).parameters.values()
                  if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    except (TypeError, ValueError):
        return False
    names = [p.name for p in params]
    return len(params) >= 3 or "rank" in names or "world_size" in names


def load_entry(tree: str, entry: str | None = None) -> Entry:
    """Import the protocol of ``tree`` (``validate.py`` or ``entry`` = ``module[:object]``).

    The tree root goes first on ``sys.path`` and becomes the working directory, as when the
    program runs from its own folder. Raises :class:`EntryError` with the reason.
    """
    tree = os.path.abspath(tree)
    spec = entry or "validate"
    module_name, _, obj_name = spec.partition(":")
    if not entry and not os.path.exists(os.path.join(tree, "validate.py")):
        raise EntryError(f"{tree}: no validate.py at the tree root (give --entry module:object or --script)")
    if tree not in sys.path:
        sys.path.insert(0, tree)
    os.chdir(tree)
    try:
        module = importlib.import_module(module_name)
    except BaseException as exc:  # noqa: BLE001 - SystemExit from a script counts too
        from .errors import summarize

        raise EntryError(f"cannot import {module_name!r} from {tree}: {summarize(exc, tree)}") from None
    target: Any = module
    if obj_name:
        try:
            for part in obj_name.split("."):
                target = getattr(target, part)
        except AttributeError:
            raise EntryError(f"{module_name}: has no attribute {obj_name!r}") from None
    missing = [n for n in REQUIRED if not callable(getattr(target, n, None))]
    if missing:
        raise EntryError(f"{spec}: missing protocol function(s) {', '.join(missing)} "
                         "(need make_model(dropout=0.0), make_batch(step), loss_fn(out, batch))")
    keys = getattr(target, "INPUT_KEYS", None)
    return Entry(
        source=f"{os.path.join(tree, module_name.replace('.', os.sep))}.py" + (f":{obj_name}" if obj_name else ""),
        make_model=target.make_model,
        make_batch=target.make_batch,
        loss_fn=target.loss_fn,
        parallelize=getattr(target, "parallelize", None),
        sync_grads=getattr(target, "sync_grads", None),
        make_optimizer=getattr(target, "make_optimizer", None),
        train_step=getattr(target, "train_step", None),
        make_scaler=getattr(target, "make_scaler", None),
        input_keys=tuple(keys) if keys is not None else None,
        batch_takes_rank=_takes_rank(target.make_batch),
    )
