"""A fused op's cause in the user's words (issue 37 item 6), in process: the fused_slips programs run
here under the torch_npu emulation, each side traced inside one module as the optrace child does,
then localised; plus the phrases for what the programs do not reach (an SDPA original, a shifted
mask, a 1/d scale) and the parent's RoPE against the emulated kernel."""

from __future__ import annotations

import json
import types

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("safetensors")

from tests.validation import fused_slips as F  # noqa: E402


def _program(text: str, name: str) -> types.ModuleType:
    module = types.ModuleType(name)
    exec(compile(text, name, "exec"), module.__dict__)  # noqa: S102 - the test's own fixture program
    return module


def _trace(tmp_path, name: str, edits, *, port: bool, target: str, weights=None):
    """One forward of the program's step-0 batch with the op tracer inside ``target``; saved as the
    optrace job saves it. Returns the trace folder and the model's weights (for the other side)."""
    from safetensors.torch import save_file

    from migrator.validation.child import npu_emulation
    from migrator.validation.child.optrace import OpTracer

    text = F._edit(F._edit(F.ORIGINAL, F.PORT) if port else F.ORIGINAL, edits)
    with npu_emulation.emulated():
        program = _program(text, f"fused_slips_{name}")
        torch.manual_seed(0)
        model = program.make_model()
        if weights is not None:
            model.load_state_dict(weights)
        batch = program.make_batch(0)
        buffers = {f"buffer.{n}": b.clone() for n, b in model.named_buffers()}
        with OpTracer(model, target) as tracer, torch.no_grad():
            model(batch["idx"], batch["pad"])
    out = tmp_path / name
    out.mkdir()
    save_file({**tracer.tensors, **buffers}, str(out / "ops.safetensors"))
    (out / "ops.json").write_text(json.dumps({"events": tracer.events, "modules": tracer.modules}))
    return str(out), model.state_dict()


TARGETS = {"scale_omitted": "block.attn", "mask_omitted": "block.attn", "mask_inverted": "block.attn",
           "swiglu_swapped": "block.mlp", "rotary_mode": "block.attn", "rms_eps": "block.attn_norm"}
FUSED_OP = {"block.attn": "npu_", "block.mlp": "npu_swiglu", "block.attn_norm": "npu_rms_norm"}


@pytest.mark.parametrize("slip", F.SLIPS, ids=[s.name for s in F.SLIPS])
def test_the_slip_is_named_on_the_fused_op_in_the_users_words(tmp_path, slip):
    from migrator.validation.parent.localisation.ops import describe, first_divergent_op

    target = TARGETS[slip.name]
    original, weights = _trace(tmp_path, "original", (), port=False, target=target)
    migrated, _ = _trace(tmp_path, "migrated", slip.edits, port=True, target=target, weights=weights)
    found = first_divergent_op(original, migrated, "fp32")
    text = describe(found, target)
    assert found["migrated_op"].startswith(FUSED_OP[target]), text  # never the op that built the mask
    for phrase in slip.cause:
        assert phrase in text, text
    assert found["rel_l2"] > 1e-4, found  # against the original op the fused one stands for


@pytest.mark.parametrize("target", sorted(set(TARGETS.values())))
def test_the_correct_port_gets_no_cause(tmp_path, target):
    from migrator.validation.parent.localisation.ops import first_divergent_op

    original, weights = _trace(tmp_path, "original", (), port=False, target=target)
    migrated, _ = _trace(tmp_path, "migrated", (), port=True, target=target, weights=weights)
    assert "cause" not in first_divergent_op(original, migrated, "fp32")  # nothing said against a right port


def test_the_scale_is_read_from_the_scores_and_blamed_not_the_mask_builder(tmp_path):
    """The port's triu mask has no original tensor to agree with (the original keeps with torch.where):
    the walk used to end on triu; the original's softmax pattern now says the mask is right."""
    from migrator.validation.parent.localisation import dataflow as D
    from migrator.validation.parent.localisation.fused_attention import eager
    from migrator.validation.parent.localisation.ops import _load

    slip = next(s for s in F.SLIPS if s.name == "scale_omitted")
    original, weights = _trace(tmp_path, "original", (), port=False, target="block.attn")
    migrated, _ = _trace(tmp_path, "migrated", slip.edits, port=True, target="block.attn", weights=weights)
    orig, mig = _load(original), _load(migrated)
    matched = D._matches(orig, mig, D._ByShape(orig), {}, 1e-4)
    f = next(i for i, e in enumerate(mig.events) if e["op"] == "npu_fusion_attention")
    triu = next(i for i, e in enumerate(mig.events) if e["op"] == "triu")
    assert matched[triu] is None  # the port's mask builder agrees with nothing in the original
    found = eager(orig, mig, f, matched)
    assert found is not None and found.scale == pytest.approx(0.125) and found.masked_by == "torch.where"
    assert found.pattern == mig.events[f]["semantic"]["attention pattern"][0]  # the port's mask is right


def _sdpa_original(keep=None, scale=None):
    from migrator.validation import op_semantics as S
    from migrator.validation.parent.localisation.fused_attention import Eager

    q = torch.zeros(1, 2, 6, 16)
    sem = S.sdpa("scaled_dot_product_attention", (q, q, q), {"attn_mask": keep, "is_causal": keep is None,
                                                               "scale": scale})
    return Eager(float(sem["scale"][0]), sem["attention pattern"][0], "SDPA is_causal=True", None, "sdpa")


def _npu(**kwargs):
    from migrator.validation import op_semantics as S

    q = torch.zeros(1, 2, 6, 16)
    return S.npu_fusion_attention("npu_fusion_attention", (q, q, q, 2, "BNSD"), kwargs)


def test_scale_phrases_say_the_values_and_what_to_pass():
    from migrator.validation.parent.localisation.fused_attention import scale_cause

    assert scale_cause(_npu(scale=0.25), _sdpa_original()) is None  # 1/sqrt(16) both
    assert scale_cause(_npu(), _sdpa_original()) == (
        "scale: the port uses 1.0 (npu_fusion_attention's default), the original 0.25 (= 1/sqrt(16)); "
        "pass scale=1/math.sqrt(head_dim)")
    assert scale_cause(_npu(scale=1 / 16), _sdpa_original()) == (
        "scale: the port uses 0.0625 (= 1/16), the original 0.25 (= 1/sqrt(16)); pass scale=1/math.sqrt(head_dim)")
    assert scale_cause(_npu(scale=0.25), _sdpa_original(scale=0.1)) == (
        "scale: the port uses 0.25 (= 1/sqrt(16)), the original 0.1; pass scale=0.1")


def test_mask_phrases_omitted_inverted_and_shifted():
    from migrator.validation.parent.localisation.fused_attention import mask_cause

    causal = torch.ones(6, 6, dtype=torch.bool).tril()
    original = _sdpa_original()
    assert mask_cause(_npu(atten_mask=~causal, scale=0.25), original) is None
    text, own = mask_cause(_npu(scale=0.25), original)
    assert own and text.startswith("mask omitted: the port attends to future positions"), text
    text, own = mask_cause(_npu(atten_mask=causal, scale=0.25), original)
    assert own and text.startswith("mask inverted: the port passes a keep-mask (True = attend)"), text
    sees_next = ~torch.ones(6, 6, dtype=torch.bool).tril(1)
    text, own = mask_cause(_npu(atten_mask=sees_next, scale=0.25), original)
    assert not own and text == ("mask too permissive: the port attends to future positions the original masks "
                                "(query 0 sees key 1 in the migrated only (5 of 36 query-key pairs differ))")


@pytest.mark.parametrize("mode", ["half", "interleave"])
def test_the_parents_rope_is_the_emulated_kernels(mode):
    from migrator.validation.child.npu_emulation.ops import npu_rotary_mul
    from migrator.validation.parent.localisation.fused_causes import rope

    g = torch.Generator().manual_seed(0)
    x, cos, sin = (torch.randn(2, 2, 5, 8, generator=g) for _ in range(3))
    assert torch.allclose(rope(x, cos, sin, mode), npu_rotary_mul(x, cos, sin, rotary_mode=mode), atol=1e-6)


GATED = '''
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch_npu


class Gated(nn.Module):
    """Mamba's gate: the halves of one projection, channels first, ``y * silu(res)``."""

    def __init__(self):
        super().__init__()
        self.in_proj = nn.Linear(4, 12, bias=False)

    def forward(self, x):
        (y, res) = self.in_proj(x).transpose(1, 2).split(split_size=[6, 6], dim=1)
        y = y * 0.5 + 1.0
        return y * F.silu(res)
'''
GATED_PORT = ("        return y * F.silu(res)\n", "        return torch_npu.npu_swiglu(torch.cat([res, y], dim=1), dim=1)\n")


def _trace_gated(tmp_path, name: str, text: str):
    from safetensors.torch import save_file

    from migrator.validation.child import npu_emulation
    from migrator.validation.child.optrace import OpTracer

    with npu_emulation.emulated():
        program = _program(text, f"gated_{name}")
        torch.manual_seed(0)
        model = torch.nn.Sequential(program.Gated())
        with OpTracer(model, "0") as tracer, torch.no_grad():
            model(torch.randn(2, 8, 4, generator=torch.Generator().manual_seed(1)))
    out = tmp_path / name
    out.mkdir()
    save_file(dict(tracer.tensors), str(out / "ops.safetensors"))
    (out / "ops.json").write_text(json.dumps({"events": tracer.events, "modules": tracer.modules}))
    return str(out)


@pytest.mark.parametrize(("cat", "phrase"), [
    ("torch.cat([y, res], dim=1), dim=1", "SwiGLU halves swapped: the port activates the up half"),
    ("torch.cat([res, y], dim=1), dim=2", "SwiGLU split dim: npu_swiglu splits dim 2, the original's gate/up halves "
                                          "lie along dim 1"),
    ("torch.cat([res, y], dim=1).transpose(1, 2).contiguous(), dim=-1).transpose(1, 2", "ok"),
], ids=["halves_swapped", "split_over_time", "same_maths"])
def test_swiglu_alternatives_re_run_on_the_ports_input_name_what_the_original_did(tmp_path, cat, phrase):
    """The original's silu reads one output of a ``split`` (not traced on its own): the port's input is
    re-run with its halves swapped / split over another dim, and the alternative the original has is named."""
    from migrator.validation.parent.localisation.ops import describe, first_divergent_op

    original = _trace_gated(tmp_path, "original", GATED)
    port = GATED.replace(*GATED_PORT).replace("torch.cat([res, y], dim=1), dim=1", cat)
    found = first_divergent_op(original, _trace_gated(tmp_path, "migrated", port), "fp32")
    if phrase == "ok":
        assert "cause" not in found, found  # nothing said against a right port
        return
    text = describe(found, "0")
    assert found["migrated_op"] == "npu_swiglu", text
    assert phrase in text, text
