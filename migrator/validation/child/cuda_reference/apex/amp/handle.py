"""Reference for ``apex.amp.scale_loss``.

On exit the grads are unscaled (``grad / loss_scale`` in fp32), checked for inf/NaN, and, when
the optimizer keeps fp32 masters (O2), moved onto the masters. With a dynamic scale an overflow
halves the scale and makes the next ``optimizer.step()`` a no-op, as in apex.
"""

from __future__ import annotations

import contextlib

import torch

from ._amp_state import _amp_state


@contextlib.contextmanager
def scale_loss(loss, optimizers, loss_id=0, model=None, delay_unscale=False, delay_overflow_check=False):
    if not _amp_state.initialized:
        yield loss
        return
    scaler = _amp_state.loss_scalers[loss_id]
    opts = optimizers if isinstance(optimizers, (list, tuple)) else [optimizers]
    scale = scaler.loss_scale()
    yield loss.float() * scale
    if delay_unscale:
        return
    overflow = False
    with torch.no_grad():
        for opt in opts:
            for model_p, master in getattr(opt, "_amp_pairs", []):
                if model_p.grad is None:
                    continue
                g = model_p.grad.float() / scale
                overflow |= not bool(torch.isfinite(g).all())
                if master is model_p:
                    model_p.grad.copy_(g)
                else:
                    master.grad = g
                    model_p.grad = None
    if scaler.update_scale(overflow):
        for opt in opts:
            opt._amp_skip_next_step = True
        if _amp_state.verbosity > 0:
            print(f"Gradient overflow.  Skipping step, loss scaler {loss_id} reducing loss scale to {scaler.loss_scale()}")


def disable_casts():
    return contextlib.nullcontext()
