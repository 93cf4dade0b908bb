"""apex.amp.initialize / amp.scale_loss with native mixed precision, copied into each migrated file
that uses them, together with the target's `_migrate_amp_scaler` / `_migrate_amp_device_type`
(apex_amp_npu.py or apex_amp_portable.py; the portable pair is imported here so the module runs)."""

import contextlib

import torch

from migrator.fix.runtime_helpers.apex_amp_portable import _migrate_amp_device_type, _migrate_amp_scaler


def _migrate_amp_initialize(models, optimizers=None, opt_level="O1", loss_scale=None, **ignored):
    """apex.amp.initialize with native mixed precision. Added by ascend-migrate.

    O0 keeps fp32. O1 (Apex's per-op casting) = float16 autocast around each model's forward plus
    dynamic loss scaling starting at 2**16 as in Apex. As Apex does, each optimizer's step is
    wrapped so that a step whose gradients overflowed is skipped. O2/O3 keep fp16 master weights or
    a pure fp16 model, which native AMP does not reproduce: port those by hand.
    """
    if opt_level not in ("O0", "O1"):
        raise NotImplementedError(f"apex opt_level {opt_level!r} has no exact native equivalent; use O1 or port by hand")
    if loss_scale not in (None, "dynamic"):
        raise NotImplementedError("a static apex loss_scale is not ported automatically; use dynamic scaling")
    enabled = opt_level == "O1"
    scaler = _migrate_amp_scaler(enabled)
    for model in models if isinstance(models, (list, tuple)) else [models]:
        if enabled:
            model.forward = torch.autocast(_migrate_amp_device_type(), dtype=torch.float16)(model.forward)
    for optimizer in optimizers if isinstance(optimizers, (list, tuple)) else [optimizers] if optimizers is not None else []:
        optimizer._migrate_scaler = scaler
        optimizer._migrate_skip_step = False
        optimizer.step = _migrate_skipping_step(optimizer, optimizer.step)
    return (models, optimizers) if optimizers is not None else models


def _migrate_skipping_step(optimizer, step):
    """The optimizer step, skipped once after an overflow. Added by ascend-migrate."""

    def wrapped(*args, **kwargs):
        if optimizer._migrate_skip_step:  # gradients overflowed: skip, as Apex does
            optimizer._migrate_skip_step = False
            return None
        return step(*args, **kwargs)

    return wrapped


@contextlib.contextmanager
def _migrate_amp_scale_loss(loss, optimizer):
    """apex.amp.scale_loss: yields the scaled loss; on exit unscales the gradients and decides whether
    the next optimizer step runs (overflow: skipped, scale reduced). Added by ascend-migrate."""
    scaler = optimizer._migrate_scaler
    yield scaler.scale(loss)
    if scaler.is_enabled():
        scaler.unscale_(optimizer)
        grads = [p.grad for group in optimizer.param_groups for p in group["params"] if p.grad is not None]
        optimizer._migrate_skip_step = not all(bool(torch.isfinite(g).all()) for g in grads)
        scaler.update()
