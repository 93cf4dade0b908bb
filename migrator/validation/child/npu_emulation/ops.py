"""Emulated torch_npu norm / RoPE / SwiGLU custom ops (ascend-facts §c.3) in plain PyTorch.

Precision: each op upcasts to fp32 (fp64 stays fp64), computes, and rounds the result once to the
input dtype. The device kernels also compute in fp32 internally; where they round an intermediate
(e.g. the normalised value before the ``gamma`` product) the emulation does not, so it acts as a
high-precision reference (numerics.md §3.3 compares bf16 results by ratio to such a reference).
They run with CPU autocast disabled (as custom ops they are on no autocast list on the device).
All ops are built from differentiable torch ops, so autograd works (derivatives.yaml lists
backward for rms_norm, rotary_mul and swiglu; add_rms_norm has none on the device — here it has).
"""

from __future__ import annotations

import torch

from .attention import no_autocast

_RMS_NORM_DTYPES = {
    (torch.float16, torch.float32), (torch.bfloat16, torch.float32), (torch.float16, torch.float16),
    (torch.bfloat16, torch.bfloat16), (torch.float32, torch.float32), (torch.float64, torch.float64),
}


def _compute_dtype(t: torch.Tensor) -> torch.dtype:
    return torch.float64 if t.dtype == torch.float64 else torch.float32


def _rms(x: torch.Tensor, gamma: torch.Tensor, epsilon: float) -> tuple[torch.Tensor, torch.Tensor]:
    g = gamma.dim()
    if g == 0 or tuple(x.shape[x.dim() - g:]) != tuple(gamma.shape):
        raise ValueError(f"npu_rms_norm: gamma shape {tuple(gamma.shape)} must equal the trailing dims of x "
                         f"{tuple(x.shape)} (ascend-facts §c.3)")
    c = _compute_dtype(x)
    xf = x.to(c)
    dims = tuple(range(x.dim() - g, x.dim()))
    rstd = torch.rsqrt(xf.pow(2).mean(dim=dims, keepdim=True) + float(epsilon))
    y = xf * rstd * gamma.to(c)
    return y, rstd


@no_autocast
def npu_rms_norm(self: torch.Tensor, gamma: torch.Tensor, epsilon: float = 1e-06) -> tuple[torch.Tensor, torch.Tensor]:
    """Emulated ``torch_npu.npu_rms_norm`` (ascend-facts §c.3).

    ``[0] = x / sqrt(mean(x², over gamma's dims) + eps) · gamma`` in the dtype of ``x``;
    ``[1] = rstd`` in fp32 with the normalised dims kept as size 1. ``gamma`` is mandatory and must
    equal the trailing dims of ``x``; (x, gamma) dtypes must be one of (fp16, fp32), (bf16, fp32),
    (fp16, fp16), (bf16, bf16), (fp32, fp32) (plus (fp64, fp64) for gradcheck) — other pairs raise
    ``TypeError`` like the device. Default eps is 1e-6 (apex FusedRMSNorm uses 1e-5, §c.3).
    Mixed (bf16 x, fp32 gamma): allowed, y in x's dtype: the A2/A3/950 table of Ascend/op-plugin
    ``docs/zh/custom_APIs/torch_npu/（beta）torch_npu-npu_rms_norm.md`` (commit 09fca6f6); the
    Atlas training/inference table lists equal dtypes only, and the emulation stands in for A2/A3.
    """
    if (self.dtype, gamma.dtype) not in _RMS_NORM_DTYPES:
        raise TypeError(f"npu_rms_norm: unsupported (x, gamma) dtypes ({self.dtype}, {gamma.dtype}); "
                        "supported: (fp16|bf16, fp32), (fp16, fp16), (bf16, bf16), (fp32, fp32) (ascend-facts §c.3)")
    y, rstd = _rms(self, gamma, epsilon)
    return y.to(self.dtype), rstd.float() if self.dtype != torch.float64 else rstd


@no_autocast
def npu_add_rms_norm(x1: torch.Tensor, x2: torch.Tensor, gamma: torch.Tensor,
                     epsilon: float = 1e-06) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Emulated ``torch_npu.npu_add_rms_norm`` (ascend-facts §c.3): returns **(y, rstd, x)**.

    ``x = x1 + x2`` (returned in the input dtype), ``y = RMSNorm(x) · gamma`` computed from the fp32
    sum, ``rstd`` fp32. fp32/fp16/bf16, no empty tensors.
    """
    if x1.dtype != x2.dtype:
        raise TypeError(f"npu_add_rms_norm: x1 and x2 must have the same dtype; got {x1.dtype}, {x2.dtype}")
    if x1.numel() == 0 or x2.numel() == 0:
        raise ValueError("npu_add_rms_norm: empty tensors are not supported (ascend-facts §c.3)")
    c = _compute_dtype(x1)
    xs = x1.to(c) + x2.to(c)
    y, rstd = _rms(xs, gamma, epsilon)
    return y.to(x1.dtype), rstd.float() if c != torch.float64 else rstd, xs.to(x1.dtype)


@no_autocast
def npu_rotary_mul(self: torch.Tensor, r1: torch.Tensor, r2: torch.Tensor, rotary_mode: str = "half",
                   rotate: torch.Tensor | None = None) -> torch.Tensor:
    """Emulated ``torch_npu.npu_rotary_mul`` (ascend-facts §c.3): ``x·r1 + rotate(x)·r2``.

    ``r1`` = cos, ``r2`` = sin over the full head dim, broadcast against ``x`` (3-D/4-D).
    ``rotary_mode='half'``: ``rotate(x) = cat(-x[..., D/2:], x[..., :D/2])`` (HF ``rotate_half``);
    ``'interleave'``: pairs ``(x[..., 0::2], x[..., 1::2])`` → ``(-x_odd, x_even)`` interleaved;
    a ``rotate`` matrix (D×D) gives ``rotate(x) = x @ rotate`` and takes precedence. D must be even.
    """
    if self.dim() not in (3, 4):
        raise ValueError(f"npu_rotary_mul: x must be 3-D or 4-D (ascend-facts §c.3); got shape {tuple(self.shape)}")
    d = self.shape[-1]
    if d % 2:
        raise ValueError(f"npu_rotary_mul: the last dim must be even; got {d}")
    if rotary_mode not in ("half", "interleave"):
        raise ValueError(f"npu_rotary_mul: rotary_mode must be 'half' or 'interleave'; got {rotary_mode!r}")
    c = _compute_dtype(self)
    x = self.to(c)
    if rotate is not None:
        rotated = torch.matmul(x, rotate.to(c))
    elif rotary_mode == "half":
        x1, x2 = x[..., : d // 2], x[..., d // 2:]
        rotated = torch.cat((-x2, x1), dim=-1)
    else:
        even, odd = x[..., 0::2], x[..., 1::2]
        rotated = torch.stack((-odd, even), dim=-1).flatten(-2)
    out = x * r1.to(c) + rotated * r2.to(c)
    return out.to(self.dtype)


@no_autocast
def npu_swiglu(self: torch.Tensor, dim: int = -1) -> torch.Tensor:
    """Emulated ``torch_npu.npu_swiglu`` (ascend-facts §c.3): ``A·sigmoid(A)·B``, ``A, B = chunk(x, 2, dim)``.

    So ``F.silu(g) * u == npu_swiglu(torch.cat([g, u], -1))``. The size of ``dim`` must be even;
    like the device kernel, non-contiguous and empty inputs are rejected (``ValueError``).
    """
    if self.numel() == 0:
        raise ValueError("npu_swiglu: empty tensors are not supported (ascend-facts §c.3)")
    if not self.is_contiguous():
        raise ValueError("npu_swiglu: non-contiguous input is not supported (ascend-facts §c.3); call .contiguous()")
    if self.shape[dim] % 2:
        raise ValueError(f"npu_swiglu: size {self.shape[dim]} of dim {dim} must be even")
    c = _compute_dtype(self)
    a, b = self.to(c).chunk(2, dim=dim)
    return (a * torch.sigmoid(a) * b).to(self.dtype)


ACL_FORMAT_ND = 2


def npu_format_cast(self: torch.Tensor, acl_format: int, *args, **kwargs) -> torch.Tensor:
    """Emulated ``torch_npu.npu_format_cast`` (ascend-facts §c: an exported ``torch.ops.npu`` op that only
    changes the device memory format): CPU tensors have no private NPU formats; identity."""
    return self


def get_npu_format(self: torch.Tensor) -> int:
    """Emulated ``torch_npu.get_npu_format`` (ascend-facts §c, exported op): always ``ACL_FORMAT_ND`` (2)."""
    return ACL_FORMAT_ND
