"""Source of the small helper functions a fix emits once per file (never a new file).

Each helper is named `_migrate_<what>`, documents what it replaces, and carries the semantics that
would otherwise be repeated at every call site (scale defaults, mask polarity, causal alignment).
"""

DEVICE_HELPER = '''def _migrate_device(index=None):
    """The accelerator this process runs on (CUDA, Ascend NPU, ...) or the CPU. Added by ascend-migrate."""
    accelerator = torch.accelerator.current_accelerator() if torch.accelerator.is_available() else None
    device_type = accelerator.type if accelerator is not None else "cpu"
    if index is None or device_type == "cpu":
        return torch.device(device_type)
    return torch.device(device_type, index)
'''

BACKEND_HELPER = '''def _migrate_backend():
    """The collective backend for this process's device (nccl, hccl, gloo). Added by ascend-migrate."""
    return torch.distributed.get_default_backend_for_device(_migrate_device())
'''

FLASH_ATTN_NPU = '''def _migrate_flash_attn(q, k, v, dropout_p=0.0, softmax_scale=None, causal=False, causal_align="bottom_right"):
    """flash_attn_func on Ascend through torch_npu.npu_fusion_attention. Added by ascend-migrate.

    (batch, seqlen, heads, head_dim) is layout "BSND"; GQA/MQA work through head_num = query heads.
    npu_fusion_attention's scale defaults to 1.0, so flash-attn's 1/sqrt(head_dim) is passed explicitly.
    Its mask marks True = masked out; causal masking uses the 2048x2048 compressed upper-triangular
    mask with sparse_mode 3 (bottom-right aligned, as flash-attn >= 2.1) or 2 (top-left).
    """
    scale = softmax_scale if softmax_scale is not None else q.shape[-1] ** -0.5
    mask = None
    sparse_mode = 0
    if causal:
        mask = torch.triu(torch.ones(2048, 2048, dtype=torch.bool, device=q.device), diagonal=1)
        sparse_mode = 3 if causal_align == "bottom_right" else 2
    return torch_npu.npu_fusion_attention(
        q, k, v, q.shape[2], "BSND",
        atten_mask=mask, scale=scale, keep_prob=1.0 - dropout_p, sparse_mode=sparse_mode,
    )[0]
'''

FLASH_ATTN_PORTABLE = '''def _migrate_flash_attn(q, k, v, dropout_p=0.0, softmax_scale=None, causal=False, causal_align="bottom_right"):
    """flash_attn_func through scaled_dot_product_attention (CUDA, Ascend, CPU). Added by ascend-migrate.

    (batch, seqlen, heads, head_dim) is transposed to SDPA's (batch, heads, seqlen, head_dim).
    SDPA's is_causal is top-left aligned while flash-attn >= 2.1 is bottom-right aligned, so it is
    used only when the query and key lengths are equal; otherwise an explicit aligned mask is built.
    """
    from torch.nn.attention.bias import causal_lower_right, causal_upper_left

    q, k, v = (t.transpose(1, 2) for t in (q, k, v))
    mask, is_causal = None, False
    if causal:
        if q.shape[2] == k.shape[2]:
            is_causal = True
        elif causal_align == "bottom_right":
            mask = causal_lower_right(q.shape[2], k.shape[2])
        else:
            mask = causal_upper_left(q.shape[2], k.shape[2])
    out = torch.nn.functional.scaled_dot_product_attention(
        q, k, v, attn_mask=mask, dropout_p=dropout_p, is_causal=is_causal, scale=softmax_scale,
        enable_gqa=q.shape[1] != k.shape[1],
    )
    return out.transpose(1, 2)
'''

FLASH_ATTN_VARLEN_NPU = '''def _migrate_flash_attn_varlen(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q=None, max_seqlen_k=None,
                               dropout_p=0.0, softmax_scale=None, causal=False):
    """flash_attn_varlen_func on Ascend through npu_fusion_attention, layout "TND". Added by ascend-migrate.

    actual_seq_qlen/kvlen are host int lists of cumulative lengths WITHOUT flash-attn's leading 0
    (a device-to-host copy); max_seqlen_* are not needed. Scale and causal mask as in _migrate_flash_attn.
    """
    scale = softmax_scale if softmax_scale is not None else q.shape[-1] ** -0.5
    mask = None
    if causal:
        mask = torch.triu(torch.ones(2048, 2048, dtype=torch.bool, device=q.device), diagonal=1)
    return torch_npu.npu_fusion_attention(
        q, k, v, q.shape[1], "TND",
        atten_mask=mask, scale=scale, keep_prob=1.0 - dropout_p,
        actual_seq_qlen=cu_seqlens_q[1:].tolist(), actual_seq_kvlen=cu_seqlens_k[1:].tolist(),
        sparse_mode=3 if causal else 0,
    )[0]
'''

FLASH_ATTN_VARLEN_PORTABLE = '''def _migrate_flash_attn_varlen(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q=None, max_seqlen_k=None,
                               dropout_p=0.0, softmax_scale=None, causal=False):
    """flash_attn_varlen_func as one SDPA call per sequence (CUDA, Ascend, CPU). Added by ascend-migrate.

    Sequences are cut at the cumulative lengths; causal masks are bottom-right aligned per sequence.
    """
    from torch.nn.attention.bias import causal_lower_right

    outs = []
    bounds_q, bounds_k = cu_seqlens_q.tolist(), cu_seqlens_k.tolist()
    for i in range(len(bounds_q) - 1):
        qi = q[bounds_q[i]:bounds_q[i + 1]].transpose(0, 1)
        ki = k[bounds_k[i]:bounds_k[i + 1]].transpose(0, 1)
        vi = v[bounds_k[i]:bounds_k[i + 1]].transpose(0, 1)
        mask = causal_lower_right(qi.shape[1], ki.shape[1]) if causal and qi.shape[1] != ki.shape[1] else None
        out = torch.nn.functional.scaled_dot_product_attention(
            qi, ki, vi, attn_mask=mask, dropout_p=dropout_p, scale=softmax_scale,
            is_causal=causal and mask is None, enable_gqa=qi.shape[0] != ki.shape[0],
        )
        outs.append(out.transpose(0, 1))
    return torch.cat(outs, dim=0)
'''

RMS_NORM_NPU = '''class _MigrateRMSNorm(torch.nn.Module):
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
        return torch_npu.npu_rms_norm(x, self.weight.to(x.dtype), epsilon=self.eps)[0]
'''
