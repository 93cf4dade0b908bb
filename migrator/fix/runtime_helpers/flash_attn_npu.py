"""FlashAttention calls on Ascend through torch_npu.npu_fusion_attention (`migrate fix --target npu`).

`_migrate_flash_attn` / `_migrate_flash_attn_varlen` are copied into each migrated file that calls
flash_attn_func / flash_attn_varlen_func; tests/fix/test_runtime_helpers.py checks them against
the attention formula under the torch_npu CPU emulation.
"""

import torch
import torch_npu


def _migrate_flash_attn(q, k, v, dropout_p=0.0, softmax_scale=None, causal=False, causal_align="bottom_right"):
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


def _migrate_flash_attn_varlen(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q=None, max_seqlen_k=None,
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
