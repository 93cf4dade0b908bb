"""Process-wide amp state (apex keeps the same singleton in ``apex/amp/_amp_state.py``)."""

from __future__ import annotations


class LossScaler:
    """apex's dynamic loss scaler: start at 2**16, halve on overflow, double after 2000 clean steps."""

    def __init__(self, loss_scale, init_scale=2.0**16, scale_factor=2.0, scale_window=2000,
                 min_loss_scale=None, max_loss_scale=2.0**24):
        self.dynamic = loss_scale == "dynamic"
        self._loss_scale = min(max_loss_scale, init_scale) if self.dynamic else float(loss_scale)
        self._scale_factor = scale_factor
        self._scale_window = scale_window
        self._min = min_loss_scale
        self._max = max_loss_scale
        self._unskipped = 0

    def loss_scale(self) -> float:
        return self._loss_scale

    def update_scale(self, overflow: bool) -> bool:
        """Returns True when the optimizer step must be skipped (only dynamic scalers skip)."""
        if overflow and self.dynamic:
            self._loss_scale = self._loss_scale / 2.0
            if self._min is not None:
                self._loss_scale = max(self._min, self._loss_scale)
            self._unskipped = 0
            return True
        self._unskipped += 1
        if self.dynamic and self._unskipped == self._scale_window:
            self._loss_scale = min(self._max, self._loss_scale * self._scale_factor)
            self._unskipped = 0
        return False


class AmpState:
    def __init__(self):
        self.reset()

    def reset(self):
        self.initialized = False
        self.opt_properties = None
        self.loss_scalers: list[LossScaler] = []
        self.verbosity = 1
        self.autocast_dtype = None  # recorded so validation results can say what O1 ran in


_amp_state = AmpState()


def master_params(optimizer):
    """Yield the params the optimizer updates (fp32 masters under O2)."""
    for group in optimizer.param_groups:
        yield from group["params"]
