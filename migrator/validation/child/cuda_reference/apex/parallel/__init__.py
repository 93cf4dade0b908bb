"""Reference for ``apex.parallel`` (DDP, SyncBatchNorm, convert_syncbn_model)."""

from .distributed import DistributedDataParallel
from .sync_batchnorm import SyncBatchNorm, convert_syncbn_model

__all__ = ["DistributedDataParallel", "SyncBatchNorm", "convert_syncbn_model"]
