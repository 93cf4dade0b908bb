"""Tests for the CPU emulation of torch_npu (migrator/validation/child/npu_emulation).

Every numerical check compares against an independent formula written out here (explicit loops,
explicit masks), never against the code under test.
"""

from __future__ import annotations

import io
import math
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

_REPO = Path(__file__).resolve().parents[2]
if str(_REPO) not in sys.path:  # allow plain `pytest` without an installed package
    sys.path.insert(0, str(_REPO))

from migrator.validation.child import npu_emulation as ne  # noqa: E402
from migrator.validation.child.npu_emulation import attention as att_mod  # noqa: E402
from migrator.validation.child.npu_emulation import ops as ops_mod  # noqa: E402
from migrator.validation.child.npu_emulation import optim as optim_mod  # noqa: E402
from migrator.validation.child.npu_emulation.remap import remap_backend, remap_device  # noqa: E402

fa = att_mod.npu_fusion_attention


@pytest.fixture
def emu():
    """Install the emulation for one test and always remove it afterwards."""
    assert not ne.is_installed()
    info = ne.install(force=True)
    try:
        yield sys.modules["torch_npu"]  # the emulated module
    finally:
        ne.uninstall()
    assert info["emulated"]


# ------------------------------------------------------------------------------------------------
# independent references
# ------------------------------------------------------------------------------------------------
def naive_attention(q, k, v, scale, mask=None, pse=None):
    """Loop reference. q (B,N,Sq,D), k/v (B,Nkv,Skv,·); mask bool broadcastable to (B,N,Sq,Skv),
    True = masked out; a row with every key masked gives zeros. GQA: head h uses kv head h // (N/Nkv).
    Differentiable (built from torch scalars)."""
    B, N, Sq, _ = q.shape
    Nkv, Skv, Dv = k.shape[1], k.shape[2], v.shape[-1]
    group = N // Nkv
    rows = []
    for b in range(B):
        for h in range(N):
            kh = h // group
            for i in range(Sq):
                allowed = []
                for j in range(Skv):
                    if mask is not None:
                        mb = b if mask.shape[0] > 1 else 0
                        mh = h if mask.shape[1] > 1 else 0
                        if bool(mask[mb, mh, i, j]):
                            continue
                    allowed.append(j)
                if not allowed:
                    rows.append(torch.zeros(Dv, dtype=q.dtype))
                    continue
                scores = []
                for j in allowed:
                    s = (q[b, h, i] * k[b, kh, j]).sum()
                    if pse is not None:
                        s = s + pse[b if pse.shape[0] > 1 else 0, h if pse.shape[1] > 1 else 0,
                                    i if pse.shape[2] > 1 else 0, j]
                    scores.append(s * scale)
                scores = torch.stack(scores)
                w = torch.exp(scores - scores.max())
                w = w / w.sum()
                acc = torch.zeros(Dv, dtype=q.dtype)
                for t, j in enumerate(allowed):
                    acc = acc + w[t] * v[b, kh, j]
                rows.append(acc)
    return torch.stack(rows).view(B, N, Sq, Dv)


def explicit_mask(sq, skv, rule):
    """(1, 1, Sq, Skv) bool mask with mask[i][j] = rule(i, j), built by loops."""
    return torch.tensor([[rule(i, j) for j in range(skv)] for i in range(sq)], dtype=torch.bool).view(1, 1, sq, skv)


def to_layout(x, layout):
    """(B,N,S,D) → layout."""
    B, N, S, D = x.shape
    if layout == "BNSD":
        return x.contiguous()
    if layout == "BSND":
        return x.permute(0, 2, 1, 3).contiguous()
    if layout == "BSH":
        return x.permute(0, 2, 1, 3).reshape(B, S, N * D)
    if layout == "SBH":
        return x.permute(2, 0, 1, 3).reshape(S, B, N * D)
    raise AssertionError(layout)


def from_layout(y, layout, n):
    """layout → (B,N,S,D)."""
    if layout == "BNSD":
        return y
    if layout == "BSND":
        return y.permute(0, 2, 1, 3)
    if layout == "BSH":
        B, S, H = y.shape
        return y.reshape(B, S, n, H // n).permute(0, 2, 1, 3)
    if layout == "SBH":
        S, B, H = y.shape
        return y.reshape(S, B, n, H // n).permute(1, 2, 0, 3)
    raise AssertionError(layout)


def compressed_mask():
    return torch.triu(torch.ones(2048, 2048), diagonal=1).bool()


def qkv(B=2, N=4, Nkv=2, Sq=5, Skv=7, D=8, Dv=None, dtype=torch.float64, seed=0):
    g = torch.Generator().manual_seed(seed)
    Dv = Dv or D
    q = torch.randn(B, N, Sq, D, generator=g, dtype=dtype)
    k = torch.randn(B, Nkv, Skv, D, generator=g, dtype=dtype)
    v = torch.randn(B, Nkv, Skv, Dv, generator=g, dtype=dtype)
    return q, k, v


# ------------------------------------------------------------------------------------------------
# npu_fusion_attention
# ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("layout", ["BSH", "SBH", "BSND", "BNSD"])
def test_fusion_attention_layouts_gqa_scale(layout):
    q, k, v = qkv(N=4, Nkv=2, Sq=5, Skv=7, D=8, Dv=6)
    res = fa(to_layout(q, layout), to_layout(k, layout), to_layout(v, layout), 4, layout, scale=0.37)
    assert isinstance(res, tuple) and len(res) == 7
    out, smax, ssum, reserved, seed, offset, numels = res
    ref = naive_attention(q, k, v, 0.37)
    torch.testing.assert_close(from_layout(out, layout, 4), ref, rtol=1e-10, atol=1e-10)
    assert out.shape == to_layout(ref, layout).shape and out.dtype == q.dtype
    # softmax statistics: fp32, (B,N,Sq,8), row max of scaled scores, sum of exp(score - max)
    assert smax.dtype == torch.float32 and ssum.dtype == torch.float32 and smax.shape == (2, 4, 5, 8)
    for b, h, i in [(0, 0, 0), (1, 3, 4), (1, 1, 2)]:
        scores = [0.37 * float((q[b, h, i] * k[b, h // 2, j]).sum()) for j in range(7)]
        mx = max(scores)
        assert smax[b, h, i, 0].item() == pytest.approx(mx, rel=1e-6)
        assert torch.all(smax[b, h, i] == smax[b, h, i, 0])
        assert ssum[b, h, i, 0].item() == pytest.approx(sum(math.exp(s - mx) for s in scores), rel=1e-6)
    assert (seed, offset, numels) == (0, 0, 0)


def test_fusion_attention_mqa_and_value_dim():
    q, k, v = qkv(N=3, Nkv=1, Sq=4, Skv=4, D=4, Dv=2)
    out = fa(q, k, v, 3, "BNSD", scale=0.5)[0]
    torch.testing.assert_close(out, naive_attention(q, k, v, 0.5), rtol=1e-10, atol=1e-10)


def test_fusion_attention_default_scale_is_one_not_rsqrt_d():
    q, k, v = qkv(N=2, Nkv=2, Sq=3, Skv=3, D=16)
    out = fa(q, k, v, 2, "BNSD")[0]
    torch.testing.assert_close(out, naive_attention(q, k, v, 1.0), rtol=1e-10, atol=1e-10)
    assert not torch.allclose(out, naive_attention(q, k, v, 1 / math.sqrt(16)), atol=1e-3)


def test_fusion_attention_mask_polarity_true_masks_out():
    q, k, v = qkv(B=2, N=2, Nkv=2, Sq=4, Skv=6)
    g = torch.Generator().manual_seed(3)
    mask = torch.rand(2, 1, 4, 6, generator=g) > 0.6  # B1SS
    mask[:, :, :, 0] = False  # keep at least one key per row
    out = fa(q, k, v, 2, "BNSD", atten_mask=mask, scale=0.3)[0]
    torch.testing.assert_close(out, naive_attention(q, k, v, 0.3, mask=mask), rtol=1e-10, atol=1e-10)
    # inverted polarity would be a different result
    inverted = naive_attention(q, k, v, 0.3, mask=~mask)
    assert not torch.allclose(out, inverted, atol=1e-3)
    # uint8 1 = masked out too; SS shape broadcasts
    out_u8 = fa(q, k, v, 2, "BNSD", atten_mask=mask.to(torch.uint8), scale=0.3)[0]
    torch.testing.assert_close(out_u8, out)
    ss = mask[0, 0]
    torch.testing.assert_close(fa(q, k, v, 2, "BNSD", atten_mask=ss, scale=0.3)[0],
                               naive_attention(q, k, v, 0.3, mask=ss.view(1, 1, 4, 6)), rtol=1e-10, atol=1e-10)


def test_fusion_attention_rejects_additive_float_mask():
    q, k, v = qkv(N=2, Nkv=2, Sq=3, Skv=3)
    float_mask = torch.zeros(3, 3).masked_fill(torch.triu(torch.ones(3, 3, dtype=torch.bool), 1), float("-inf"))
    with pytest.raises(TypeError, match="bool or uint8"):
        fa(q, k, v, 2, "BNSD", atten_mask=float_mask)


def test_sparse_modes_2_and_3_top_left_vs_bottom_right_with_sq_ne_skv():
    sq, skv = 3, 6
    q, k, v = qkv(B=1, N=2, Nkv=1, Sq=sq, Skv=skv)
    m2 = fa(q, k, v, 2, "BNSD", atten_mask=compressed_mask(), sparse_mode=2, scale=0.4)[0]
    m3 = fa(q, k, v, 2, "BNSD", atten_mask=compressed_mask(), sparse_mode=3, scale=0.4)[0]
    top_left = explicit_mask(sq, skv, lambda i, j: j > i)  # triu(ones(Sq,Skv), 1)
    bottom_right = explicit_mask(sq, skv, lambda i, j: j > i + (skv - sq))  # triu(k = Skv-Sq+1)
    torch.testing.assert_close(m2, naive_attention(q, k, v, 0.4, mask=top_left), rtol=1e-10, atol=1e-10)
    torch.testing.assert_close(m3, naive_attention(q, k, v, 0.4, mask=bottom_right), rtol=1e-10, atol=1e-10)
    assert not torch.allclose(m2, m3, atol=1e-3)
    # with Sq == Skv both alignments coincide
    q2, k2, v2 = qkv(B=1, N=2, Nkv=2, Sq=4, Skv=4)
    a = fa(q2, k2, v2, 2, "BNSD", atten_mask=compressed_mask(), sparse_mode=2)[0]
    b = fa(q2, k2, v2, 2, "BNSD", atten_mask=compressed_mask(), sparse_mode=3)[0]
    torch.testing.assert_close(a, b)


def test_sparse_mode_3_sq_gt_skv_fully_masked_rows_are_zero():
    sq, skv = 5, 2
    q, k, v = qkv(B=1, N=1, Nkv=1, Sq=sq, Skv=skv)
    res = fa(q, k, v, 1, "BNSD", atten_mask=compressed_mask(), sparse_mode=3)
    out = res[0]
    assert torch.all(out[0, 0, : sq - skv] == 0)  # rows 0..2 see no key
    torch.testing.assert_close(out, naive_attention(q, k, v, 1.0, mask=explicit_mask(sq, skv, lambda i, j: j > i - 3)))
    assert torch.isinf(res[1][0, 0, 0, 0]) and res[2][0, 0, 0, 0] == 0


@pytest.mark.parametrize("sq,skv", [(6, 6), (4, 7)])
def test_sparse_mode_4_band_bottom_right_origin(sq, skv):
    pre, nxt = 2, 1
    q, k, v = qkv(B=1, N=2, Nkv=2, Sq=sq, Skv=skv)
    out = fa(q, k, v, 2, "BNSD", atten_mask=compressed_mask(), sparse_mode=4, pre_tockens=pre, next_tockens=nxt)[0]
    off = skv - sq
    band = explicit_mask(sq, skv, lambda i, j: (j > i + off + nxt) or (j < i + off - pre))
    torch.testing.assert_close(out, naive_attention(q, k, v, 1.0, mask=band), rtol=1e-10, atol=1e-10)
    if sq == skv:  # = triu(k=next+1) + tril(k=-pre-1) (msprobe's expansion)
        t = torch.triu(torch.ones(sq, skv), nxt + 1) + torch.tril(torch.ones(sq, skv), -pre - 1)
        assert torch.equal(t.bool().view(1, 1, sq, skv), band)


def test_sparse_mode_4_origin_settled_by_the_op_plugin_mode_7_example():
    """op-plugin torch_npu-npu_fusion_attention.md: mode 4 "参数起点为右下角"; its mode-7 example cuts a
    4x6 rightDownCausal block into 2x6 halves, the first configured as a band with pre=6, next=-2.
    Only the bottom-right origin reproduces rows 0-1 of the unsplit block; msprobe's top-left
    expansion triu(k=next+1)+tril(k=-pre-1) masks every key of row 0 instead."""
    q, k, v = qkv(B=1, N=2, Nkv=2, Sq=2, Skv=6)
    out = fa(q, k, v, 2, "BNSD", atten_mask=compressed_mask(), sparse_mode=4, pre_tockens=6, next_tockens=-2)[0]
    unsplit_rows = explicit_mask(2, 6, lambda i, j: j > i + (6 - 4))  # rows 0..1 of the 4x6 rightDownCausal
    torch.testing.assert_close(out, naive_attention(q, k, v, 1.0, mask=unsplit_rows), rtol=1e-10, atol=1e-10)
    top_left = (torch.triu(torch.ones(2, 6), -2 + 1) + torch.tril(torch.ones(2, 6), -6 - 1)).bool()
    assert bool(top_left[0].all()) and not torch.equal(top_left.view(1, 1, 2, 6), unsplit_rows)


def test_fusion_attention_bf16_rounds_p_before_the_second_matmul():
    """bf16 in, fp32 accumulate, P rounded to bf16 for P.V, bf16 out (the device kernel's rounding)."""
    q, k, v = (t.bfloat16() for t in qkv(B=1, N=2, Nkv=2, Sq=16, Skv=16, D=16, dtype=torch.float32, seed=3))
    q = (q.float() * 4).bfloat16()  # large scores: P's rounding matters
    out = fa(q, k, v, 2, "BNSD", scale=0.25)[0]
    p = torch.softmax(torch.matmul(q.float(), k.float().transpose(-1, -2)) * 0.25, dim=-1)
    rounded = torch.matmul(p.bfloat16().float(), v.float()).bfloat16()
    unrounded = torch.matmul(p, v.float()).bfloat16()
    assert not torch.equal(rounded, unrounded)  # the test can tell the two apart
    assert (out.float() - rounded.float()).abs().max() < (out.float() - unrounded.float()).abs().max()
    assert out.dtype == torch.bfloat16


def test_sparse_mode_0_user_mask_plus_band_and_mode_1():
    q, k, v = qkv(B=1, N=2, Nkv=2, Sq=5, Skv=5)
    user = explicit_mask(5, 5, lambda i, j: j == 4 and i < 4)  # hide the last key from rows 0..3
    # defaults: no band
    out0 = fa(q, k, v, 2, "BNSD", atten_mask=user)[0]
    torch.testing.assert_close(out0, naive_attention(q, k, v, 1.0, mask=user), rtol=1e-10, atol=1e-10)
    # band from pre/next (top-left origin) OR'ed with the mask
    out_band = fa(q, k, v, 2, "BNSD", atten_mask=user, pre_tockens=1, next_tockens=0)[0]
    combined = explicit_mask(5, 5, lambda i, j: (j == 4 and i < 4) or (j - i > 0) or (i - j > 1))
    torch.testing.assert_close(out_band, naive_attention(q, k, v, 1.0, mask=combined), rtol=1e-10, atol=1e-10)
    # without a mask pre/next are ignored (full attention)
    torch.testing.assert_close(fa(q, k, v, 2, "BNSD", pre_tockens=0, next_tockens=0)[0],
                               naive_attention(q, k, v, 1.0), rtol=1e-10, atol=1e-10)
    # mode 1 ignores pre/next
    out1 = fa(q, k, v, 2, "BNSD", atten_mask=user, sparse_mode=1, pre_tockens=0, next_tockens=0)[0]
    torch.testing.assert_close(out1, out0)


@pytest.mark.parametrize("mode", [2, 3, 4])
def test_compressed_modes_require_2048_mask(mode):
    q, k, v = qkv(B=1, N=2, Nkv=2, Sq=4, Skv=4)
    causal_ss = torch.triu(torch.ones(4, 4, dtype=torch.bool), 1)
    with pytest.raises(ValueError, match="2048"):
        fa(q, k, v, 2, "BNSD", atten_mask=causal_ss, sparse_mode=mode)
    with pytest.raises(ValueError, match="2048"):
        fa(q, k, v, 2, "BNSD", atten_mask=None, sparse_mode=mode)
    with pytest.raises(ValueError, match="different contents"):
        fa(q, k, v, 2, "BNSD", atten_mask=torch.tril(torch.ones(2048, 2048), -1).bool(), sparse_mode=mode)
    good = compressed_mask()
    fa(q, k, v, 2, "BNSD", atten_mask=good, sparse_mode=mode)
    good[0, 5] = False  # edited in place after a successful call: checked again
    with pytest.raises(ValueError, match="different contents"):
        fa(q, k, v, 2, "BNSD", atten_mask=good, sparse_mode=mode)


def test_tnd_varlen_matches_per_sequence_attention():
    N, Nkv, D = 4, 2, 4
    qlens, kvlens = [3, 5, 2], [4, 5, 3]
    g = torch.Generator().manual_seed(7)
    q = torch.randn(sum(qlens), N, D, generator=g, dtype=torch.float64)
    k = torch.randn(sum(kvlens), Nkv, D, generator=g, dtype=torch.float64)
    v = torch.randn(sum(kvlens), Nkv, D, generator=g, dtype=torch.float64)
    cum_q = [3, 8, 10]  # cumulative, no leading 0
    cum_kv = [4, 9, 12]
    for mode, rule in [(0, None), (3, "br"), (2, "tl")]:
        kwargs = dict(actual_seq_qlen=cum_q, actual_seq_kvlen=cum_kv, sparse_mode=mode, scale=0.5)
        if mode:
            kwargs["atten_mask"] = compressed_mask()
        out, smax = fa(q, k, v, N, "TND", **kwargs)[:2]
        assert out.shape == (10, N, D) and smax.shape == (10, N, 8)
        q0 = k0 = 0
        for sq, skv in zip(qlens, kvlens):
            qs = q[q0:q0 + sq].permute(1, 0, 2).unsqueeze(0)
            ks = k[k0:k0 + skv].permute(1, 0, 2).unsqueeze(0)
            vs = v[k0:k0 + skv].permute(1, 0, 2).unsqueeze(0)
            mask = None
            if rule == "br":
                mask = explicit_mask(sq, skv, lambda i, j, sq=sq, skv=skv: j > i + skv - sq)
            elif rule == "tl":
                mask = explicit_mask(sq, skv, lambda i, j: j > i)
            ref = naive_attention(qs, ks, vs, 0.5, mask=mask)[0].permute(1, 0, 2)
            torch.testing.assert_close(out[q0:q0 + sq], ref, rtol=1e-10, atol=1e-10)
            q0, k0 = q0 + sq, k0 + skv


def test_tnd_empty_and_trailing_sequences():
    N, D = 2, 4
    g = torch.Generator().manual_seed(1)
    q = torch.randn(9, N, D, generator=g, dtype=torch.float64)
    k = torch.randn(9, N, D, generator=g, dtype=torch.float64)
    v = torch.randn(9, N, D, generator=g, dtype=torch.float64)
    # lengths 2, 0 (repeated value), 3, then trailing zeros skip the rest; tokens 5..8 unused
    out = fa(q, k, v, N, "TND", actual_seq_qlen=[2, 2, 5, 0, 0], actual_seq_kvlen=[2, 2, 5, 0, 0])[0]
    for a, b in [(0, 2), (2, 5)]:
        ref = naive_attention(q[a:b].permute(1, 0, 2)[None], k[a:b].permute(1, 0, 2)[None],
                              v[a:b].permute(1, 0, 2)[None], 1.0)[0].permute(1, 0, 2)
        torch.testing.assert_close(out[a:b], ref, rtol=1e-10, atol=1e-10)
    assert torch.all(out[5:] == 0)
    with pytest.raises(ValueError, match="actual_seq_qlen"):
        fa(q, k, v, N, "TND")


def _tnd_check(qlens, kvlens, masks, **kwargs):
    """Run TND attention and compare every sequence with the loop reference and its explicit mask."""
    N, D = 2, 4
    g = torch.Generator().manual_seed(21)
    q = torch.randn(sum(qlens), N, D, generator=g, dtype=torch.float64)
    k = torch.randn(sum(kvlens), N, D, generator=g, dtype=torch.float64)
    v = torch.randn(sum(kvlens), N, D, generator=g, dtype=torch.float64)
    cum = lambda xs: [sum(xs[: i + 1]) for i in range(len(xs))]  # noqa: E731
    out = fa(q, k, v, N, "TND", actual_seq_qlen=cum(qlens), actual_seq_kvlen=cum(kvlens),
             atten_mask=compressed_mask(), **kwargs)[0]
    q0 = k0 = 0
    for sq, skv, mask in zip(qlens, kvlens, masks):
        ref = naive_attention(q[q0:q0 + sq].permute(1, 0, 2)[None], k[k0:k0 + skv].permute(1, 0, 2)[None],
                              v[k0:k0 + skv].permute(1, 0, 2)[None], 1.0, mask=mask)[0].permute(1, 0, 2)
        torch.testing.assert_close(out[q0:q0 + sq], ref, rtol=1e-10, atol=1e-10)
        q0, k0 = q0 + sq, k0 + skv


def test_tnd_mode_0_ss_mask_and_band():
    # varlen masks are SS = maxSq x maxSkv; each sequence uses its top-left block, OR'ed with the band
    N, D = 2, 4
    g = torch.Generator().manual_seed(4)
    q = torch.randn(7, N, D, generator=g, dtype=torch.float64)
    k = torch.randn(8, N, D, generator=g, dtype=torch.float64)
    v = torch.randn(8, N, D, generator=g, dtype=torch.float64)
    ss = torch.rand(4, 5, generator=g) > 0.7
    out = fa(q, k, v, N, "TND", atten_mask=ss, actual_seq_qlen=[3, 7], actual_seq_kvlen=[3, 8],
             pre_tockens=2, next_tockens=1)[0]
    for (q0, sq), (k0, skv) in zip([(0, 3), (3, 4)], [(0, 3), (3, 5)]):
        m = explicit_mask(sq, skv, lambda i, j: bool(ss[i, j]) or (j - i > 1) or (i - j > 2))
        ref = naive_attention(q[q0:q0 + sq].permute(1, 0, 2)[None], k[k0:k0 + skv].permute(1, 0, 2)[None],
                              v[k0:k0 + skv].permute(1, 0, 2)[None], 1.0, mask=m)[0].permute(1, 0, 2)
        torch.testing.assert_close(out[q0:q0 + sq], ref, rtol=1e-10, atol=1e-10)


def test_tnd_sparse_mode_7_split_sequence_right_down_causal():
    # op-plugin sparse-mode page, mode 7 example, card 1: qlen {3,5}, kvlen {3,9}, pre=6, next=-2;
    # the last sequence is rows 0..1 of an unsplit 4x6 rightDownCausal block (keep j <= i + 2)
    _tnd_check([3, 2], [3, 6], [explicit_mask(3, 3, lambda i, j: j > i), explicit_mask(2, 6, lambda i, j: j > i + 2)],
               sparse_mode=7, pre_tockens=6, next_tockens=-2)


def test_tnd_sparse_mode_8_split_sequence_left_up_causal():
    # mode 8 example, card 2: qlen {3,8,12}, kvlen {4,9,13}, pre=4, next=1; the first sequence is
    # rows 2..4 of an unsplit 5x4 leftUpCausal block (keep j <= i + 2)
    _tnd_check([3, 5, 4], [4, 5, 4],
               [explicit_mask(3, 4, lambda i, j: j > i + 2), explicit_mask(5, 5, lambda i, j: j > i),
                explicit_mask(4, 4, lambda i, j: j > i)],
               sparse_mode=8, pre_tockens=4, next_tockens=1)


def test_fusion_attention_gradcheck_float64():
    q, k, v = qkv(B=1, N=2, Nkv=1, Sq=3, Skv=4, D=2)
    q.requires_grad_(True), k.requires_grad_(True), v.requires_grad_(True)
    mask = compressed_mask()

    def f(q_, k_, v_):
        return fa(q_, k_, v_, 2, "BNSD", atten_mask=mask, sparse_mode=3, scale=0.7)[0]

    assert torch.autograd.gradcheck(f, (q, k, v))


def test_fusion_attention_grads_match_naive_bsnd_fp32():
    q, k, v = qkv(B=1, N=2, Nkv=1, Sq=4, Skv=5, D=4, dtype=torch.float32, seed=5)
    mask = explicit_mask(4, 5, lambda i, j: (i + j) % 3 == 0 and j != 0)
    qa, ka, va = (t.clone().requires_grad_(True) for t in (q, k, v))
    qb, kb, vb = (t.clone().requires_grad_(True) for t in (q, k, v))
    out = fa(to_layout(qa, "BSND"), to_layout(ka, "BSND"), to_layout(va, "BSND"), 2, "BSND",
             atten_mask=mask, scale=0.6)[0]
    w = torch.linspace(-1, 1, out.numel()).view_as(out)
    (out * w).sum().backward()
    ref = naive_attention(qb, kb, vb, 0.6, mask=mask)
    (to_layout(ref, "BSND") * w).sum().backward()
    for a, b in [(qa, qb), (ka, kb), (va, vb)]:
        torch.testing.assert_close(a.grad, b.grad, rtol=1e-5, atol=1e-6)


def test_fusion_attention_bf16_output_dtype_and_pse():
    q, k, v = qkv(B=1, N=2, Nkv=2, Sq=4, Skv=4, D=8, dtype=torch.float32, seed=9)
    pse = torch.randn(1, 2, 4, 4, generator=torch.Generator().manual_seed(2))
    out, smax = fa(q.bfloat16(), k.bfloat16(), v.bfloat16(), 2, "BNSD", pse=pse.bfloat16(), scale=0.5)[:2]
    assert out.dtype == torch.bfloat16 and smax.dtype == torch.float32
    ref = naive_attention(q.bfloat16().double(), k.bfloat16().double(), v.bfloat16().double(), 0.5,
                          pse=pse.bfloat16().double())
    torch.testing.assert_close(out.double(), ref, rtol=1.6e-2, atol=1e-2)


def test_custom_ops_ignore_enclosing_autocast(emu):
    q, k, v = qkv(B=1, N=2, Nkv=2, Sq=4, Skv=4, D=8, dtype=torch.float32, seed=4)
    plain = fa(q, k, v, 2, "BNSD", scale=0.3)[0]
    x, gamma = torch.randn(3, 8), torch.ones(8)
    with torch.autocast("npu", dtype=torch.bfloat16):
        inside = fa(q, k, v, 2, "BNSD", scale=0.3)[0]
        rot = ops_mod.npu_rotary_mul(x.view(1, 1, 3, 8), torch.ones(8), torch.zeros(8), rotate=torch.eye(8))
    assert inside.dtype == torch.float32 and rot.dtype == torch.float32
    torch.testing.assert_close(inside, plain)
    expected = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6)
    torch.testing.assert_close(ops_mod.npu_rms_norm(x, gamma)[0], expected)


def test_fusion_attention_dropout_is_seeded():
    q, k, v = qkv(B=1, N=2, Nkv=2, Sq=4, Skv=4)
    a = fa(q, k, v, 2, "BNSD", keep_prob=0.5, seed=1234)
    b = fa(q, k, v, 2, "BNSD", keep_prob=0.5, seed=1234)
    c = fa(q, k, v, 2, "BNSD", keep_prob=0.5, seed=99)
    torch.testing.assert_close(a[0], b[0])
    assert not torch.allclose(a[0], c[0])
    assert a[4] == 1234 and a[6] == 1 * 2 * 4 * 4
    assert not torch.allclose(a[0], fa(q, k, v, 2, "BNSD")[0])


# ------------------------------------------------------------------------------------------------
# norms, RoPE, SwiGLU
# ------------------------------------------------------------------------------------------------
def test_npu_rms_norm_matches_formula():
    g = torch.Generator().manual_seed(0)
    x = torch.randn(2, 3, 8, generator=g)
    gamma = torch.randn(8, generator=g)
    y, rstd = ops_mod.npu_rms_norm(x, gamma, epsilon=1e-5)
    assert rstd.dtype == torch.float32 and rstd.shape == (2, 3, 1)
    for a in range(2):
        for b in range(3):
            row = [float(t) for t in x[a, b]]
            r = 1.0 / math.sqrt(sum(t * t for t in row) / 8 + 1e-5)
            assert rstd[a, b, 0].item() == pytest.approx(r, rel=1e-6)
            for d in range(8):
                assert y[a, b, d].item() == pytest.approx(row[d] * r * float(gamma[d]), rel=1e-5, abs=1e-6)
    # default epsilon is 1e-6
    y_default = ops_mod.npu_rms_norm(torch.full((1, 4), 1e-3), torch.ones(4))[0]
    assert y_default[0, 0].item() == pytest.approx(1e-3 / math.sqrt(1e-6 + 1e-6), rel=1e-5)
    # bf16 activations with fp32 gamma are allowed, output keeps the activation dtype
    assert ops_mod.npu_rms_norm(x.bfloat16(), gamma)[0].dtype == torch.bfloat16
    with pytest.raises(TypeError):
        ops_mod.npu_rms_norm(x, gamma.bfloat16())


def test_npu_add_rms_norm_returns_y_rstd_x():
    g = torch.Generator().manual_seed(1)
    x1, x2, gamma = torch.randn(4, 6, generator=g), torch.randn(4, 6, generator=g), torch.randn(6, generator=g)
    y, rstd, x = ops_mod.npu_add_rms_norm(x1, x2, gamma)
    s = x1 + x2
    torch.testing.assert_close(x, s)
    expected = s / torch.sqrt((s * s).mean(-1, keepdim=True) + 1e-6) * gamma
    torch.testing.assert_close(y, expected)
    assert rstd.shape == (4, 1) and rstd.dtype == torch.float32


def test_npu_rotary_mul_half_and_interleave():
    g = torch.Generator().manual_seed(2)
    B, N, S, D = 1, 2, 3, 6
    x = torch.randn(B, N, S, D, generator=g)
    ang = torch.rand(1, 1, S, D, generator=g) * 3
    cos, sin = torch.cos(ang), torch.sin(ang)
    half = ops_mod.npu_rotary_mul(x, cos, sin)
    inter = ops_mod.npu_rotary_mul(x, cos, sin, rotary_mode="interleave")
    h = D // 2
    for n in range(N):
        for s in range(S):
            for d in range(D):
                c, si = cos[0, 0, s, d].item(), sin[0, 0, s, d].item()
                rot_half = -x[0, n, s, d + h].item() if d < h else x[0, n, s, d - h].item()
                assert half[0, n, s, d].item() == pytest.approx(x[0, n, s, d].item() * c + rot_half * si, abs=1e-6)
                rot_pair = -x[0, n, s, d + 1].item() if d % 2 == 0 else x[0, n, s, d - 1].item()
                assert inter[0, n, s, d].item() == pytest.approx(x[0, n, s, d].item() * c + rot_pair * si, abs=1e-6)
    # HF rotate_half equivalence and the explicit rotate matrix
    hf = x * cos + torch.cat((-x[..., h:], x[..., :h]), -1) * sin
    torch.testing.assert_close(half, hf)
    rot = torch.zeros(D, D)
    for d in range(h):
        rot[d + h, d] = -1.0  # out[d] = -x[d+h]
        rot[d, d + h] = 1.0   # out[d+h] = x[d]
    torch.testing.assert_close(ops_mod.npu_rotary_mul(x, cos, sin, rotate=rot), half)


def test_npu_swiglu_matches_formula():
    g = torch.Generator().manual_seed(3)
    x = torch.randn(3, 8, generator=g)
    out = ops_mod.npu_swiglu(x)
    for r in range(3):
        for c in range(4):
            a, b = x[r, c].item(), x[r, c + 4].item()
            assert out[r, c].item() == pytest.approx(a / (1 + math.exp(-a)) * b, rel=1e-5, abs=1e-7)
    gate, up = torch.randn(2, 5, generator=g), torch.randn(2, 5, generator=g)
    torch.testing.assert_close(ops_mod.npu_swiglu(torch.cat([gate, up], -1)), torch.nn.functional.silu(gate) * up)
    out0 = ops_mod.npu_swiglu(x.t().contiguous(), dim=0)
    torch.testing.assert_close(out0, out.t())
    with pytest.raises(ValueError):
        ops_mod.npu_swiglu(torch.randn(2, 5))
    with pytest.raises(ValueError, match="non-contiguous"):
        ops_mod.npu_swiglu(torch.randn(8, 4).t())


# ------------------------------------------------------------------------------------------------
# fused optimizers: 3 steps against hand-written updates
# ------------------------------------------------------------------------------------------------
def _grads(shape, steps=3, seed=11, scale=1.0):
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(shape, generator=g) * scale for _ in range(steps)]


def _run(opt_cls, p0, grads, **kw):
    p = torch.nn.Parameter(p0.clone())
    opt = opt_cls([p], **kw)
    for g in grads:
        p.grad = g.clone()
        opt.step()
    return p.detach(), opt


def test_npu_fused_adamw_three_steps_and_defaults():
    p0 = torch.randn(5, generator=torch.Generator().manual_seed(0))
    grads = _grads(5)
    got, opt = _run(optim_mod.NpuFusedAdamW, p0, grads, lr=0.01)
    d = opt.defaults
    assert (d["betas"], d["eps"], d["weight_decay"], d["amsgrad"]) == ((0.9, 0.999), 1e-8, 1e-2, False)
    p, m, v = p0.double().clone(), torch.zeros(5, dtype=torch.float64), torch.zeros(5, dtype=torch.float64)
    lr, b1, b2, eps, wd = 0.01, 0.9, 0.999, 1e-8, 1e-2
    for t, g in enumerate(grads, 1):
        g = g.double()
        p = p * (1 - lr * wd)
        m = b1 * m + (1 - b1) * g
        v = b2 * v + (1 - b2) * g * g
        p = p - lr * (m / (1 - b1 ** t)) / (torch.sqrt(v / (1 - b2 ** t)) + eps)
    torch.testing.assert_close(got.double(), p, rtol=1e-5, atol=1e-6)


def test_npu_fused_adam_is_l2_not_decoupled():
    p0 = torch.randn(4, generator=torch.Generator().manual_seed(1))
    grads = _grads(4, seed=12)
    got, opt = _run(optim_mod.NpuFusedAdam, p0, grads, lr=0.02, weight_decay=0.1)
    assert optim_mod.NpuFusedAdam([torch.nn.Parameter(torch.zeros(1))]).defaults["weight_decay"] == 0
    p, m, v = p0.double().clone(), torch.zeros(4, dtype=torch.float64), torch.zeros(4, dtype=torch.float64)
    lr, b1, b2, eps, wd = 0.02, 0.9, 0.999, 1e-8, 0.1
    for t, g in enumerate(grads, 1):
        g = g.double() + wd * p
        m = b1 * m + (1 - b1) * g
        v = b2 * v + (1 - b2) * g * g
        p = p - lr * (m / (1 - b1 ** t)) / (torch.sqrt(v / (1 - b2 ** t)) + eps)
    torch.testing.assert_close(got.double(), p, rtol=1e-5, atol=1e-6)
    adamw, _ = _run(optim_mod.NpuFusedAdamW, p0, grads, lr=0.02, weight_decay=0.1)
    assert not torch.allclose(adamw, got)


@pytest.mark.parametrize("nesterov", [False, True])
def test_npu_fused_sgd_three_steps(nesterov):
    p0 = torch.randn(6, generator=torch.Generator().manual_seed(2))
    grads = _grads(6, seed=13)
    damp = 0.0 if nesterov else 0.1
    got, _ = _run(optim_mod.NpuFusedSGD, p0, grads, lr=0.1, momentum=0.9, dampening=damp,
                  weight_decay=0.01, nesterov=nesterov)
    p, buf = p0.double().clone(), None
    for g in grads:
        d = g.double() + 0.01 * p
        buf = d.clone() if buf is None else 0.9 * buf + (1 - damp) * d
        step = d + 0.9 * buf if nesterov else buf
        p = p - 0.1 * step
    torch.testing.assert_close(got.double(), p, rtol=1e-5, atol=1e-6)
    with pytest.raises(ValueError):  # lr is required
        optim_mod.NpuFusedSGD([torch.nn.Parameter(torch.zeros(1))])


@pytest.mark.parametrize("weight_norm_scale", [1.0, 10.0])
def test_npu_fused_lamb_three_steps_no_bias_correction_norm_clamp(weight_norm_scale):
    # scale 10: ||p|| > 10, so the trust ratio uses the clamped weight norm 10
    p0 = torch.randn(8, generator=torch.Generator().manual_seed(3)) * weight_norm_scale
    grads = _grads(8, seed=14)
    got, opt = _run(optim_mod.NpuFusedLamb, p0, grads, lr=0.01, weight_decay=0.01)
    assert opt.defaults["eps"] == 1e-6 and not opt.adam and not opt.use_global_grad_norm
    p, m, v = p0.double().clone(), torch.zeros(8, dtype=torch.float64), torch.zeros(8, dtype=torch.float64)
    for g in grads:
        g = g.double()
        m = 0.9 * m + 0.1 * g
        v = 0.999 * v + 0.001 * g * g
        u = m / (torch.sqrt(v) + 1e-6) + 0.01 * p
        wn = min(max(math.sqrt(float((p * p).sum())), 0.0), 10.0)
        un = math.sqrt(float((u * u).sum()))
        trust = 1.0 if wn == 0 or un == 0 else wn / un
        p = p - 0.01 * trust * u
    torch.testing.assert_close(got.double(), p, rtol=1e-5, atol=1e-6)


def test_npu_fused_lamb_global_grad_norm():
    p0 = torch.randn(4, generator=torch.Generator().manual_seed(4))
    grads = _grads(4, seed=15, scale=5.0)  # global norm > 1
    got, _ = _run(optim_mod.NpuFusedLamb, p0, grads, lr=0.01, use_global_grad_norm=True, adam=True)
    p, m, v = p0.double().clone(), torch.zeros(4, dtype=torch.float64), torch.zeros(4, dtype=torch.float64)
    for g in grads:
        g = g.double()
        norm = math.sqrt(float((g * g).sum()))
        g = g / norm if norm > 1 else g
        m = 0.9 * m + 0.1 * g
        v = 0.999 * v + 0.001 * g * g
        p = p - 0.01 * (m / (torch.sqrt(v) + 1e-6))
    torch.testing.assert_close(got.double(), p, rtol=1e-5, atol=1e-6)


def test_fused_optimizer_base_behaviour():
    p = torch.nn.Parameter(torch.ones(3, dtype=torch.bfloat16))
    opt = optim_mod.NpuFusedAdamW([p])
    p.grad = torch.ones(3, dtype=torch.bfloat16)
    with pytest.raises(TypeError, match="float32 or float16"):
        opt.step()
    q = torch.nn.Parameter(torch.ones(4))
    opt = optim_mod.NpuFusedSGD([q], lr=0.1)
    q.grad = torch.full((4,), 3.0)
    with pytest.raises(ValueError, match="set_to_none"):
        opt.zero_grad(set_to_none=True)
    total = opt.clip_grad_norm_fused_(1.0)
    assert total.item() == pytest.approx(6.0)
    assert torch.linalg.vector_norm(q.grad).item() == pytest.approx(1.0, rel=1e-5)
    opt.zero_grad()
    assert q.grad is not None and torch.all(q.grad == 0)


# ------------------------------------------------------------------------------------------------
# install / uninstall, device remap, runtime API
# ------------------------------------------------------------------------------------------------
def _snapshot():
    import torch.distributed as dist
    from torch.amp import autocast_mode

    return {
        "zeros": torch.zeros, "device": torch.device, "Generator": torch.Generator, "load": torch.load,
        "Module.to": torch.nn.Module.__dict__.get("to"), "ac_init": autocast_mode.autocast.__init__,
        "init_pg": dist.init_process_group, "new_group": dist.new_group,
        "tensor_to_own": "to" in torch.Tensor.__dict__, "has_npu": hasattr(torch, "npu"),
        "tensor_npu": hasattr(torch.Tensor, "npu"), "is_autocast_enabled": torch.is_autocast_enabled,
        "meta_path": list(sys.meta_path),
    }


def test_install_uninstall_restores_everything():
    before = _snapshot()
    assert not before["has_npu"] and not before["tensor_to_own"] and "torch_npu" not in sys.modules
    info = ne.install(force=True)
    try:
        assert info["emulated"] and info["installed_now"] and "torch.zeros" in info["patched"]
        assert "emulation" in info["label"]
        import torch_npu

        assert torch_npu.__emulated__ and torch_npu.__version__.endswith("+emulated")
        assert torch.npu is torch_npu.npu and sys.modules["torch.npu"] is torch_npu.npu
        assert torch.zeros is not before["zeros"] and "to" in torch.Tensor.__dict__
        again = ne.install(force=True)
        assert again["already_installed"] and not again["installed_now"]
    finally:
        result = ne.uninstall()
    assert result["uninstalled"]
    after = _snapshot()
    assert after == before
    for name in ("torch_npu", "torch_npu.npu", "torch_npu.optim", "torch.npu", "torch.npu.amp"):
        assert name not in sys.modules
    with pytest.raises(RuntimeError):
        torch.device("npu")
    assert not ne.uninstall()["uninstalled"]


def test_install_does_nothing_when_real_torch_npu_present():
    import types

    fake = types.ModuleType("torch_npu")  # stands for an importable real torch_npu
    sys.modules["torch_npu"] = fake
    try:
        before = _snapshot()
        info = ne.install()
        assert info["real_torch_npu"] and not info["emulated"] and "NOT installed" in info["message"]
        assert not ne.is_installed() and _snapshot() == before and sys.modules["torch_npu"] is fake
    finally:
        del sys.modules["torch_npu"]


def test_emulated_context_manager():
    with ne.emulated() as info:
        assert info["emulated"] and "torch_npu" in sys.modules
    assert "torch_npu" not in sys.modules and not ne.is_installed()


def test_device_remap_factories_and_device_objects(emu):
    assert torch.zeros(2, device="npu").device.type == "cpu"
    assert torch.ones(2, device="npu:3").device.type == "cpu"
    assert torch.randn(2, device=torch.device("npu:0")).device.type == "cpu"
    assert torch.tensor([1.0], device="npu").device.type == "cpu"
    assert torch.arange(3, device="npu:0").device.type == "cpu"
    assert torch.full((2,), 1.0, device=0).device.type == "cpu"
    assert torch.zeros(1).new_zeros(2, device="npu").device.type == "cpu"
    d = torch.device("npu:0")
    assert isinstance(d, torch.device) and d == torch.device("cpu") and d.type == "cpu"
    assert torch.device("npu", 1).type == "cpu" and torch.device(type="npu", index=0).type == "cpu"
    assert torch.device("cuda:1").type == "cuda"  # other devices untouched
    with torch.device("npu"):
        assert torch.zeros(1).device.type == "cpu"
    assert torch.Generator(device="npu").device.type == "cpu"
    assert remap_device("npu_ckpt.pt") == "npu_ckpt.pt"  # exact match, not a substring rewrite
    buf = io.BytesIO()
    torch.save({"w": torch.ones(2)}, buf)
    buf.seek(0)
    assert torch.load(buf, map_location="npu:0")["w"].device.type == "cpu"


def test_device_remap_tensor_and_module_methods(emu):
    x = torch.ones(3)
    assert x.npu().device.type == "cpu" and x.is_npu
    y = x.to("npu", torch.float64)
    assert y.dtype == torch.float64 and y.device.type == "cpu"
    assert x.to(0).device.type == "cpu" and x.to(device="npu:1").device.type == "cpu"
    assert x.pin_memory() is x
    model = torch.nn.Linear(3, 2)
    assert model.npu() is model and next(model.parameters()).device.type == "cpu"
    assert model.to("npu:0") is model and model.to(torch.device("npu")) is model
    out = model.to("npu")(torch.randn(4, 3, device="npu"))
    assert out.shape == (4, 2)
    x.record_stream(torch.npu.current_stream())  # accepted (no-op) for emulated streams


def test_torch_npu_runtime_api(emu):
    npu = torch.npu
    assert npu.is_available() and npu.device_count() == 1 and npu.is_bf16_supported()
    assert npu.get_device_name() == "Ascend (emulated on CPU)"
    npu.synchronize()
    npu.set_device(1)
    assert npu.current_device() == 1
    npu.set_device("npu:0")
    assert npu.current_device() == 0
    with npu.device(2):
        assert npu.current_device() == 2
    assert npu.current_device() == 0
    npu.manual_seed(5)
    a = torch.rand(3)
    npu.manual_seed_all(5)
    assert torch.equal(a, torch.rand(3))
    s = npu.Stream()
    with npu.stream(s):
        assert npu.current_stream() is s
    assert npu.current_stream() is npu.default_stream()
    start, end = npu.Event(enable_timing=True), npu.Event(enable_timing=True)
    start.record()
    end.record()
    npu.synchronize()
    assert start.elapsed_time(end) >= 0.0
    assert npu.mstx.range_push("step") == 1 and npu.mstx.range_pop() == 0
    npu.mstx.mark("here")
    npu.empty_cache()
    assert npu.memory_allocated() == 0 and npu.max_memory_allocated() == 0
    assert npu.memory_stats()["allocated_bytes.all.peak"] == 0
    npu.reset_peak_memory_stats()
    assert npu.get_device_capability() is None
    assert not hasattr(npu.get_device_properties(), "major")
    with pytest.raises(RuntimeError, match="not emulated"):
        npu.NPUGraph()
    with pytest.raises(AttributeError, match="not part of the torch_npu emulation"):
        npu.some_missing_api  # noqa: B018
    import torch_npu

    assert torch_npu.npu_fusion_attention is fa and torch_npu.optim.NpuFusedAdamW is optim_mod.NpuFusedAdamW
    assert torch.get_device_module("npu") is npu


def test_autocast_and_grad_scaler(emu):
    a, b = torch.randn(4, 4), torch.randn(4, 4)
    with torch.autocast("npu", dtype=torch.bfloat16):
        assert (a @ b).dtype == torch.bfloat16
        assert torch.is_autocast_enabled("npu")
    with torch.amp.autocast(device_type="npu", dtype=torch.float16):
        assert (a @ b).dtype == torch.float16
    with torch.npu.amp.autocast():  # torch_npu's default: fp16, never substituted by bf16
        assert (a @ b).dtype == torch.float16
    with torch.autocast("npu"):
        assert (a @ b).dtype == torch.float16
    assert (a @ b).dtype == torch.float32
    model = torch.nn.Linear(4, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for scaler in (torch.npu.amp.GradScaler(init_scale=8.0), torch.amp.GradScaler("npu", init_scale=8.0)):
        w0 = model.weight.detach().clone()
        opt.zero_grad()
        loss = model(a).sum()
        scaler.scale(loss).backward()
        torch.testing.assert_close(model.weight.grad, 8.0 * a.sum(0, keepdim=True))  # scaled grads
        scaler.step(opt)
        scaler.update()
        torch.testing.assert_close(model.weight.detach(), w0 - 0.1 * a.sum(0, keepdim=True))  # unscaled step
    static = torch.npu.amp.GradScaler(init_scale=4.0, dynamic=False)
    opt.zero_grad()
    static.scale(model(a).sum() * float("inf")).backward()
    static.step(opt)
    static.update()
    assert static.get_scale() == 4.0


def test_amp_default_dtype_is_configurable():
    with ne.emulated(force=True, amp_dtype=torch.bfloat16):
        with torch.npu.amp.autocast():
            assert (torch.randn(2, 2) @ torch.randn(2, 2)).dtype == torch.bfloat16
        with torch.npu.amp.autocast(dtype=torch.float16):  # explicit dtype wins
            assert (torch.randn(2, 2) @ torch.randn(2, 2)).dtype == torch.float16


def test_hccl_to_gloo_and_ddp(emu):
    import torch.distributed as dist

    assert remap_backend("hccl") == "gloo" and remap_backend("npu:hccl") == "cpu:gloo"
    assert remap_backend("cpu:gloo,npu:hccl") == "cpu:gloo" and remap_backend("nccl") == "nccl"
    assert dist.is_hccl_available()
    dist.init_process_group("hccl", store=dist.HashStore(), rank=0, world_size=1, device_id=torch.device("npu:0"))
    try:
        assert dist.get_backend() == "gloo"
        group = dist.new_group([0], backend="hccl")
        t = torch.ones(2, device="npu")
        dist.all_reduce(t, group=group)
        assert torch.equal(t, torch.ones(2))
        ddp = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(2, 2).npu(), device_ids=[0])
        ddp(torch.randn(3, 2)).sum().backward()
    finally:
        dist.destroy_process_group()
