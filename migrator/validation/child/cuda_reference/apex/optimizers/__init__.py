"""Reference for ``apex.optimizers`` (fused optimizers written out element-wise in fp32)."""

from .fused_adam import FusedAdam
from .fused_lamb import FusedLAMB
from .fused_sgd import FusedSGD

__all__ = ["FusedAdam", "FusedLAMB", "FusedSGD"]
