"""CPU reference stand-in for NVIDIA ``apex`` (amp, optimizers, normalization, parallel).

Pure PyTorch, written from apex's documented formulas and kernels (see each submodule); no CUDA
extensions (``amp_C``, ``fused_layer_norm_cuda``) are needed or provided.
"""

__cuda_reference__ = True

from . import amp, normalization, optimizers, parallel  # noqa: E402,F401
