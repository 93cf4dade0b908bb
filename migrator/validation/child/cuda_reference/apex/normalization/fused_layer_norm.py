"""Reference for ``apex.normalization`` fused LayerNorm / RMSNorm.

Formulas (apex docstrings): ``y = (x - E[x]) / sqrt(Var[x] + eps) * gamma + beta`` and
``y = x / sqrt(mean(x^2) + eps) * gamma`` over the trailing ``normalized_shape`` dims,
eps=1e-5, elementwise_affine=True, weight=1, bias=0.

We emulate what the CUDA kernels do on GPU, not apex's own CPU fallback:
* statistics and the affine step are computed in float32 (the kernels accumulate in fp32; for
  RMSNorm this is apex's ``manual_rms_norm``, which takes the variance of ``x.float()``);
* under autocast, input and weight are first cast to the autocast dtype (apex's
  ``_cast_if_autocast_enabled``), so the output is in the autocast dtype;
* ``Fused*`` return the input dtype, ``MixedFused*`` return the parameter dtype.
(apex's CPU fallback would return fp32 for a bf16 input with fp32 weights.)
"""

from __future__ import annotations

import numbers
import warnings

import torch
from torch.nn import Parameter, init

__all__ = ["FusedLayerNorm", "FusedRMSNorm", "MixedFusedLayerNorm", "MixedFusedRMSNorm", "manual_rms_norm"]


def manual_rms_norm(input, normalized_shape, weight, eps):
    """apex's reference (from HuggingFace): fp32 variance, output cast to a half weight's dtype."""
    dims = tuple(i for i in range(-1, -len(normalized_shape) - 1, -1))
    variance = input.to(torch.float32).pow(2).mean(dims, keepdim=True)
    input = input * torch.rsqrt(variance + eps)
    if weight is None:
        return input
    if weight.dtype in (torch.float16, torch.bfloat16):
        input = input.to(weight.dtype)
    return weight * input


def _autocast_dtype(x: torch.Tensor):
    dev = x.device.type
    if torch.is_autocast_enabled(dev):
        return torch.get_autocast_dtype(dev)
    return None


class _FusedNormBase(torch.nn.Module):
    _rms = False
    _mixed = False

    def __init__(self, normalized_shape, eps=1e-5, elementwise_affine=True, memory_efficient=False):
        super().__init__()
        if isinstance(normalized_shape, numbers.Integral):
            normalized_shape = (normalized_shape,)
        self.normalized_shape = torch.Size(normalized_shape)
        self.eps = eps
        self.elementwise_affine = elementwise_affine
        self.memory_efficient = memory_efficient  # only changes what the kernel saves for backward
        if elementwise_affine:
            self.weight = Parameter(torch.empty(*normalized_shape))
            if self._rms:
                self.register_parameter("bias", None)
            else:
                self.bias = Parameter(torch.empty(*normalized_shape))
        else:
            self.register_parameter("weight", None)
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self):
        if self.elementwise_affine:
            init.ones_(self.weight)
            if self.bias is not None:
                init.zeros_(self.bias)

    def forward(self, input: torch.Tensor) -> torch.Tensor:
        weight: torch.Tensor | None = self.weight  # a Parameter, or None without elementwise_affine
        bias: torch.Tensor | None = self.bias
        cast = _autocast_dtype(input)
        if cast is not None:
            input = input.to(cast)
            weight = None if weight is None else weight.to(cast)
            bias = None if bias is None else bias.to(cast)
        out_dtype = weight.dtype if (self._mixed and weight is not None) else input.dtype
        dims = tuple(range(-len(self.normalized_shape), 0))
        with torch.autocast(input.device.type, enabled=False):
            x = input.float()
            if self._rms:
                y = x * torch.rsqrt(x.pow(2).mean(dims, keepdim=True) + self.eps)
            else:
                mean = x.mean(dims, keepdim=True)
                var = (x - mean).pow(2).mean(dims, keepdim=True)  # biased, as in LayerNorm
                y = (x - mean) * torch.rsqrt(var + self.eps)
            if weight is not None:
                y = y * weight.float()
            if bias is not None:
                y = y + bias.float()
        return y.to(out_dtype)

    def extra_repr(self):
        return f"{self.normalized_shape}, eps={self.eps}, elementwise_affine={self.elementwise_affine}"


class FusedLayerNorm(_FusedNormBase):
    pass


class FusedRMSNorm(_FusedNormBase):
    _rms = True


def _mixed_init(self, parent, normalized_shape, eps, memory_efficient, kwargs):
    if "elementwise_affine" in kwargs:
        warnings.warn(f"{type(self).__name__} does not support `elementwise_affine` argument", stacklevel=2)
        if not kwargs.pop("elementwise_affine"):
            raise RuntimeError(f"{type(self).__name__} does not support `elementwise_affine = False`")
    parent.__init__(self, normalized_shape, eps=eps, elementwise_affine=True, memory_efficient=memory_efficient)


class MixedFusedLayerNorm(FusedLayerNorm):
    """Parameters stay fp32 while the input may be half; the output takes the parameter dtype."""

    _mixed = True

    def __init__(self, normalized_shape, eps=1e-5, *, memory_efficient=False, **kwargs):
        _mixed_init(self, FusedLayerNorm, normalized_shape, eps, memory_efficient, kwargs)


class MixedFusedRMSNorm(FusedRMSNorm):
    _mixed = True

    def __init__(self, normalized_shape, eps=1e-5, *, memory_efficient=False, **kwargs):
        _mixed_init(self, FusedRMSNorm, normalized_shape, eps, memory_efficient, kwargs)
