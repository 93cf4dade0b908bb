"""ascend-migrate: move PyTorch CUDA training code to Ascend NPUs and prove the numbers kept."""

__version__ = "0.1.0"
