"""FlashAttention calls through scaled_dot_product_attention (`migrate fix --target portable`).

`_migrate_flash_attn` / `_migrate_flash_attn_varlen` are copied into each migrated file that calls
flash_attn_func / flash_attn_varlen_func; they run wherever SDPA does (CUDA, Ascend, CPU).
"""

import torch


def _migrate_flash_attn(q, k, v, dropout_p=0.0, softmax_scale=None, causal=False, causal_align="bottom_right"):
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


def _migrate_flash_attn_varlen(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q=None, max_seqlen_k=None,
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
