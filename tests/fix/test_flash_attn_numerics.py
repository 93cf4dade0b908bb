"""The emitted FlashAttention replacements compute flash_attn's attention.

The helpers are the real modules in migrator/fix/runtime_helpers/ (run whole, as their files are; the
fix inserts their definitions verbatim: tests/fix/test_runtime_helpers.py). The reference is
written from the documented formula (softmax(scale * q k^T + mask) v, with flash-attn >= 2.1's
bottom-right causal alignment), independently of both helpers. The npu helper runs against the
torch_npu CPU emulation of npu_fusion_attention; the portable helper runs SDPA.
"""

from __future__ import annotations

import math

import pytest

torch = pytest.importorskip("torch")

from migrator.validation.child import npu_emulation  # noqa: E402
from tests.fix.runtime import helper_module  # noqa: E402


def reference(q, k, v, scale=None, causal=False, align="bottom_right"):
    """(B, S, H, D) attention, computed head by head with explicit loops over the mask."""
    b, sq, hq, d = q.shape
    skv, hkv = k.shape[1], k.shape[2]
    scale = scale if scale is not None else 1.0 / math.sqrt(d)
    out = torch.zeros(b, sq, hq, v.shape[-1], dtype=torch.float64)
    for h in range(hq):
        kh = h // (hq // hkv)  # GQA: query head h reads kv head h // group
        scores = torch.einsum("bqd,bkd->bqk", q[:, :, h].double(), k[:, :, kh].double()) * scale
        if causal:
            offset = skv - sq if align == "bottom_right" else 0
            for i in range(sq):
                for j in range(skv):
                    if j > i + offset:
                        scores[:, i, j] = float("-inf")
        out[:, :, h] = torch.softmax(scores, dim=-1) @ v[:, :, kh].double()
    return out


def _helper(module: str, name: str):
    return helper_module(module)[name]  # npu modules import torch_npu: the emulation while installed


@pytest.fixture(scope="module")
def emulation():
    npu_emulation.install()
    yield
    npu_emulation.uninstall()


CASES = [
    # (Sq, Skv, Hq, Hkv, causal, scale)
    (6, 6, 2, 2, True, None),
    (4, 7, 2, 2, True, None),  # keys longer than queries: causal alignment matters
    (5, 5, 4, 2, False, None),  # GQA
    (3, 8, 4, 1, True, 0.3),  # MQA, explicit scale
]


@pytest.mark.parametrize("sq, skv, hq, hkv, causal, scale", CASES)
@pytest.mark.parametrize("target", ["npu", "portable"])
def test_flash_attn_helper_matches_formula(emulation, target, sq, skv, hq, hkv, causal, scale):
    gen = torch.Generator().manual_seed(sq * 100 + skv)
    q = torch.randn(2, sq, hq, 8, generator=gen)
    k = torch.randn(2, skv, hkv, 8, generator=gen)
    v = torch.randn(2, skv, hkv, 8, generator=gen)
    fn = _helper(f"flash_attn_{target}", "_migrate_flash_attn")
    got = fn(q, k, v, 0.0, scale, causal)
    torch.testing.assert_close(got.double(), reference(q, k, v, scale, causal), atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("target", ["npu", "portable"])
def test_top_left_alignment_for_xformers_masks(emulation, target):
    gen = torch.Generator().manual_seed(7)
    q, k, v = (torch.randn(1, s, 2, 8, generator=gen) for s in (3, 6, 6))
    fn = _helper(f"flash_attn_{target}", "_migrate_flash_attn")
    got = fn(q, k, v, causal=True, causal_align="top_left")
    torch.testing.assert_close(got.double(), reference(q, k, v, causal=True, align="top_left"), atol=1e-5, rtol=1e-5)
    bottom = reference(q, k, v, causal=True, align="bottom_right")
    assert not torch.allclose(got.double(), bottom, atol=1e-3)  # the two alignments really differ here


@pytest.mark.parametrize("target", ["npu", "portable"])
def test_varlen_helper_matches_per_sequence_formula(emulation, target):
    gen = torch.Generator().manual_seed(3)
    lengths_q, lengths_k = [3, 5, 2], [4, 5, 6]
    cu_q = torch.tensor([0, *torch.tensor(lengths_q).cumsum(0).tolist()], dtype=torch.int32)
    cu_k = torch.tensor([0, *torch.tensor(lengths_k).cumsum(0).tolist()], dtype=torch.int32)
    q = torch.randn(sum(lengths_q), 2, 8, generator=gen)
    k = torch.randn(sum(lengths_k), 2, 8, generator=gen)
    v = torch.randn(sum(lengths_k), 2, 8, generator=gen)
    fn = _helper(f"flash_attn_{target}", "_migrate_flash_attn_varlen")
    got = fn(q, k, v, cu_q, cu_k, max(lengths_q), max(lengths_k), causal=True)
    pieces = []
    for i in range(3):
        qs = q[cu_q[i]:cu_q[i + 1]].unsqueeze(0)
        ks = k[cu_k[i]:cu_k[i + 1]].unsqueeze(0)
        vs = v[cu_k[i]:cu_k[i + 1]].unsqueeze(0)
        pieces.append(reference(qs, ks, vs, causal=True)[0])
    torch.testing.assert_close(got.double(), torch.cat(pieces), atol=1e-5, rtol=1e-5)


def test_rms_norm_module_keeps_apex_eps_and_weight(emulation):
    cls = _helper("rms_norm_npu", "_MigrateRMSNorm")
    norm = cls(8, eps=1e-5)
    with torch.no_grad():
        norm.weight.copy_(torch.linspace(0.5, 1.5, 8))
    x = torch.randn(3, 8, generator=torch.Generator().manual_seed(1))
    expected = x / torch.sqrt(x.pow(2).mean(-1, keepdim=True) + 1e-5) * norm.weight
    torch.testing.assert_close(norm(x), expected, atol=1e-6, rtol=1e-5)
    assert set(dict(norm.named_parameters())) == {"weight"}
