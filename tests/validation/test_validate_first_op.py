"""First divergent op with its semantic arguments: one test per known op pair, plus the tracer and
the alignment on real traces (in process, no child processes)."""

from __future__ import annotations

import json

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("safetensors")

from migrator.validation import op_semantics as S  # noqa: E402


def q(b=1, s=8, n=2, d=64):
    return torch.zeros(b, s, n, d)


def _diff(orig, mig):
    return S.diff(S.from_json(S.jsonable(orig)), S.from_json(S.jsonable(mig)), ("o", "m"))


def npu(*, scale=None, sparse_mode=0, mask=None, layout="BSND", keep_prob=1.0, skv=8):
    kwargs = {"atten_mask": mask, "keep_prob": keep_prob, "sparse_mode": sparse_mode}
    if scale is not None:
        kwargs["scale"] = scale
    return S.npu_fusion_attention("npu_fusion_attention", (q(), q(s=skv), q(s=skv), 2, layout), kwargs)


def test_flash_attn_vs_npu_scale_default_and_causal_alignment():
    flash = S.flash_attn("flash_attn_func", (q(), q(), q()), {"causal": True})
    compressed = torch.ones(2048, 2048, dtype=torch.bool)
    assert _diff(flash, npu(scale=0.125, sparse_mode=3, mask=compressed)) == []  # the correct port
    assert _diff(flash, npu(sparse_mode=3, mask=compressed)) == [
        "scale: 1 (npu default) vs 0.125 (flash_attn default 1/√64)"]
    # top-left and bottom-right causal are one pattern when Sq == Skv: two encodings, no difference
    assert _diff(flash, npu(scale=0.125, sparse_mode=2, mask=compressed)) == []
    longer_kv = S.flash_attn("flash_attn_func", (q(), q(s=12), q(s=12)), {"causal": True})
    assert _diff(longer_kv, npu(scale=0.125, sparse_mode=2, mask=compressed, skv=12)) == [
        "causal alignment: top-left (sparse_mode 2) vs bottom-right (flash_attn >= 2.1 causal=True)",
        "attention pattern: query 0 sees key 1 in the original only (32 of 96 query-key pairs differ)"]
    lines = _diff(flash, npu(scale=0.125, layout="BNSD", keep_prob=0.9, sparse_mode=3, mask=compressed))
    assert lines == ["layout: BNSD (input_layout) vs BSND (flash_attn (B, S, N, D))",
                     "keep_prob: 0.9 (keep_prob) vs 1 (1 - dropout_p)",  # BNSD reads the 2 heads as 2 queries:
                     "attention pattern: patterns of different shapes: (1, 2, 2) (migrated) vs (1, 8, 8) (original) "
                     "[batch, query, key]"]
    varlen = S.flash_attn("flash_attn_varlen_func", (q()[0], q()[0], q()[0], None, None, 8, 8, 0.1), {})
    assert varlen["layout"][0] == "TND" and varlen["keep_prob"][0] == pytest.approx(0.9)


def test_xformers_vs_npu_top_left_mask_and_scale():
    class LowerTriangularMask:  # the class name is what xformers' bias types are known by
        pass

    class LowerTriangularFromBottomRightMask:
        pass

    compressed = torch.ones(2048, 2048, dtype=torch.bool)
    top_left = S.xformers("memory_efficient_attention", (q(), q(s=12), q(s=12), LowerTriangularMask()), {})
    assert _diff(top_left, npu(scale=0.125, sparse_mode=2, mask=compressed, skv=12)) == []
    assert _diff(top_left, npu(scale=0.125, sparse_mode=3, mask=compressed, skv=12)) == [
        "causal alignment: bottom-right (sparse_mode 3) vs top-left (LowerTriangularMask)",
        "attention pattern: query 0 sees key 1 in the migrated only (32 of 96 query-key pairs differ)"]
    bottom_right = S.xformers("memory_efficient_attention", (q(), q(), q()),
                              {"attn_bias": LowerTriangularFromBottomRightMask(), "scale": 0.5})
    assert _diff(bottom_right, npu(scale=0.125, sparse_mode=3, mask=compressed)) == [
        "scale: 0.125 (given) vs 0.5 (given)"]


def test_sdpa_vs_npu_mask_polarity():
    keep = torch.ones(8, 8, dtype=torch.bool).tril()
    sdpa = S.sdpa("scaled_dot_product_attention", (q(), q(), q()), {"attn_mask": keep})
    lines = _diff(sdpa, npu(scale=0.125, sparse_mode=0, mask=keep))
    assert "mask polarity: bool [8, 8], True = masked out (atten_mask) vs bool, True = attend (attn_mask)" in lines
    assert "layout: BSND (input_layout) vs BNSD (SDPA (B, N, S, D))" in lines
    causal = S.sdpa("scaled_dot_product_attention", (q(), q(), q()), {"is_causal": True})
    assert causal["causal alignment"][0] == "top-left"


def test_norms_eps_and_affine():
    class FusedRMSNorm(torch.nn.Module):
        eps, elementwise_affine = 1e-5, True

    apex = S.norm_module(FusedRMSNorm())
    npu_default = S.npu_rms_norm("npu_rms_norm", (torch.zeros(2, 4), torch.ones(4)), {})
    assert _diff(apex, npu_default) == ["eps: 1e-06 (npu default) vs 1e-05 (FusedRMSNorm(eps=...))"]
    assert _diff(apex, S.npu_rms_norm("npu_rms_norm", (torch.zeros(2, 4), torch.ones(4), 1e-5), {})) == []
    ln = S.layer_norm("layer_norm", (torch.zeros(2, 4), (4,)), {})
    assert ln == {"eps": (1e-5, "F.layer_norm default"), "affine": (False, "weight passed")}
    assert _diff(apex, ln) == ["affine: False (weight passed) vs True (elementwise_affine)"]


def test_optimizers_lr_betas_eps_weight_decay_adam_w_mode():
    params = [torch.nn.Parameter(torch.zeros(2))]

    class FusedAdam(torch.optim.Adam):  # apex-style: adam_w_mode attribute
        adam_w_mode = 1

    fused = S.optimizer(FusedAdam(params, lr=3e-4, betas=(0.9, 0.95), eps=1e-8))
    adamw = S.optimizer(torch.optim.AdamW(params, lr=3e-4, betas=(0.9, 0.999), eps=1e-8))
    assert _diff(fused, adamw) == ["betas: (0.9, 0.999) (AdamW) vs (0.9, 0.95) (FusedAdam)",
                                   "weight_decay: 0.01 (AdamW) vs 0 (FusedAdam)"]
    adam = S.optimizer(torch.optim.Adam(params, lr=1e-3, betas=(0.9, 0.95), eps=1e-6))
    lines = _diff(fused, adam)
    assert "lr: 0.001 (Adam) vs 0.0003 (FusedAdam)" in lines and "eps: 1e-06 (Adam) vs 1e-08 (FusedAdam)" in lines
    assert "decoupled weight decay (adam_w_mode): False (Adam) vs True (FusedAdam.adam_w_mode)" in lines


class _Attn(torch.nn.Module):
    def __init__(self, scale):
        super().__init__()
        self.proj = torch.nn.Linear(16, 16)
        self.scale = scale

    def forward(self, x):
        h = self.proj(x).view(1, 4, 2, 8).transpose(1, 2)
        return torch.nn.functional.scaled_dot_product_attention(h, h, h, scale=self.scale)


class _Net(torch.nn.Module):
    def __init__(self, scale):
        super().__init__()
        self.attn = _Attn(scale)
        self.head = torch.nn.Linear(8, 3)

    def forward(self, x):
        return self.head(self.attn(x))


def _trace(tmp_path, name, scale):
    from safetensors.torch import save_file

    from migrator.validation.child.optrace import OpTracer

    torch.manual_seed(0)
    model = _Net(scale)
    x = torch.randn(1, 4, 16, generator=torch.Generator().manual_seed(1))
    with OpTracer(model, "attn") as tracer, torch.no_grad():
        model(x)
    out = tmp_path / name
    out.mkdir()
    save_file(tracer.tensors, str(out / "ops.safetensors"))
    (out / "ops.json").write_text(json.dumps({"events": tracer.events, "modules": tracer.modules}))
    return tracer.events, str(out)


def test_tracer_records_only_inside_the_target_module_and_alignment_names_the_op(tmp_path):
    from migrator.validation.parent.localisation.ops import describe, first_divergent_op

    events, original = _trace(tmp_path, "original", None)
    # head (outside) not traced; views included, each op linked to what it read
    assert [e["op"] for e in events] == ["linear", "view", "transpose", "scaled_dot_product_attention"]
    assert events[0]["inputs"] == [["input", 0], ["param", "attn.proj.weight"], ["param", "attn.proj.bias"]]
    assert events[3]["inputs"] == [["op", 2]] * 3
    _, migrated = _trace(tmp_path, "migrated", 1.0)
    found = first_divergent_op(original, migrated, "fp32")
    assert found["migrated_op"] == found["original_op"] == "scaled_dot_product_attention" and found["index"] == 3
    assert found["argument_diff"] == ["scale: 1 (given) vs 0.3536 (SDPA default 1/√8)"]
    assert "first divergent op inside attn: scaled_dot_product_attention (migrated)" in describe(found, "attn")
    _, same = _trace(tmp_path, "same", None)
    assert first_divergent_op(original, same, "fp32")["migrated_op"] is None
