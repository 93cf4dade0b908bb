"""apex FusedRMSNorm on Ascend (`migrate fix --target npu`): `_MigrateRMSNorm` is copied into each
migrated file that builds one (the portable target uses torch.nn.RMSNorm instead)."""

import torch
import torch_npu


class _MigrateRMSNorm(torch.nn.Module):
    """apex FusedRMSNorm on Ascend through torch_npu.npu_rms_norm. Added by ascend-migrate.

    Same parameter name (`weight`) and defaults as apex (eps=1e-5, elementwise_affine=True);
    npu_rms_norm needs a weight, so a non-affine norm uses a constant buffer of ones.
    """

    def __init__(self, normalized_shape, eps=1e-5, elementwise_affine=True):
        super().__init__()
        if isinstance(normalized_shape, int):
            normalized_shape = (normalized_shape,)
        self.normalized_shape = tuple(normalized_shape)
        self.eps = eps
        self.elementwise_affine = elementwise_affine
        if elementwise_affine:
            self.weight = torch.nn.Parameter(torch.ones(self.normalized_shape))
        else:
            self.register_buffer("weight", torch.ones(self.normalized_shape), persistent=False)

    def forward(self, x):
        if torch.is_autocast_enabled(x.device.type):  # like apex: normalise in the autocast dtype
            x = x.to(torch.get_autocast_dtype(x.device.type))
        return torch_npu.npu_rms_norm(x, self.weight.to(x.dtype), epsilon=self.eps)[0]
