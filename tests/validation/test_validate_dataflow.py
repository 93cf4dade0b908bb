"""Naming the cause, in process (no child processes): attention masks by the pattern they allow,
optimizers per parameter, losses with every argument, the data-flow walk over real op traces, and
the training-step phases."""

from __future__ import annotations

import json

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("safetensors")

import torch.nn.functional as F  # noqa: E402

from migrator.validation import metrics as M  # noqa: E402
from migrator.validation import op_semantics as S  # noqa: E402


def _diff(orig, mig):
    return S.diff(S.from_json(S.jsonable(orig)), S.from_json(S.jsonable(mig)), ("o", "m"))


def _sdpa(mask=None, causal=False, s=6):
    q = torch.zeros(2, 2, s, 4)
    return S.sdpa("scaled_dot_product_attention", (q, q, q), {"attn_mask": mask, "is_causal": causal})


# ------------------------------------------------------------------ attention patterns
def test_two_encodings_of_one_mask_are_equal_and_a_shifted_mask_is_not():
    keep = torch.ones(6, 6, dtype=torch.bool).tril()
    additive = torch.zeros(6, 6).masked_fill(~keep, float("-inf"))
    assert _diff(_sdpa(keep), _sdpa(additive)) == []  # bool vs additive: same pattern, polarity not a diff
    assert _diff(_sdpa(causal=True), _sdpa(keep)) == []  # is_causal vs an explicit causal mask
    sees_next = torch.ones(6, 6, dtype=torch.bool).tril(1)
    lines = _diff(_sdpa(keep), _sdpa(sees_next))
    assert lines == ["attention pattern: query 0 sees key 1 in the migrated only (5 of 36 query-key pairs differ)"]
    q = torch.zeros(2, 6, 2, 4)  # npu BSND, atten_mask True = masked out: ~keep is the same pattern
    npu = S.npu_fusion_attention("npu_fusion_attention", (q, q, q, 2, "BSND"),
                                 {"atten_mask": ~keep, "scale": 0.5, "sparse_mode": 0})
    assert [line for line in _diff(_sdpa(keep), npu) if "pattern" in line or "polarity" in line] == []
    npu_keep = S.npu_fusion_attention("npu_fusion_attention", (q, q, q, 2, "BSND"),
                                      {"atten_mask": keep, "scale": 0.5, "sparse_mode": 0})  # SDPA polarity: wrong
    assert any(line.startswith("attention pattern: query 0 sees key 0 in the original only (36 of 36")
               for line in _diff(_sdpa(keep), npu_keep))


def test_padding_masks_compare_per_batch_row():
    pad = torch.tensor([[True] * 6, [True] * 4 + [False] * 2])
    causal = torch.ones(6, 6, dtype=torch.bool).tril()
    good = causal[None, None] & pad[:, None, None, :]
    left = causal[None, None] & pad.flip(-1)[:, None, None, :]  # padding taken from the wrong side
    assert _diff(_sdpa(good), _sdpa(good.float().log())) == []  # log(1)=0 keep, log(0)=-inf masked
    assert _diff(_sdpa(good), _sdpa(left))[0].startswith("attention pattern: batch 1 query 0 sees key 0 in the original")


def test_mismatch_of_a_bool_and_an_additive_mask_is_their_pattern():
    keep = torch.ones(4, 4, dtype=torch.bool).tril()
    additive = torch.zeros(4, 4).masked_fill(~keep, float("-inf"))
    assert M.mismatch_fraction(additive, keep) == 0.0 and M.mismatch_fraction(keep, additive) == 0.0
    assert M.mismatch_fraction(torch.zeros(4, 4), keep) == pytest.approx(6 / 16)


# ------------------------------------------------------------------ optimizer and loss arguments
def test_optimizer_parameter_groups_are_compared_per_parameter():
    model = torch.nn.Sequential(torch.nn.Linear(3, 3), torch.nn.LayerNorm(3))
    names = {id(p): n for n, p in model.named_parameters()}
    decay = [p for p in model.parameters() if p.dim() >= 2]
    rest = [p for p in model.parameters() if p.dim() < 2]
    groups = torch.optim.SGD([{"params": decay, "weight_decay": 0.1}, {"params": rest, "weight_decay": 0.0}], lr=0.1)
    one = torch.optim.SGD([{"params": decay + rest, "weight_decay": 0.1}], lr=0.1)
    assert _diff(S.optimizer(groups, names), S.optimizer(groups, names)) == []
    assert _diff(S.optimizer(groups, names), S.optimizer(one, names)) == [
        "weight_decay: 0.1 (SGD) vs 0 (SGD) for 3 of 4 parameters (0.bias, 1.weight, 1.bias)"]
    assert _diff(S.optimizer(groups), S.optimizer(one)) == []  # without names: the first groups agree


def test_loss_arguments_include_defaults_and_keywords():
    logits, targets = torch.zeros(4, 5), torch.tensor([0, 1, 2, -100])
    plain = S.loss_call(F.cross_entropy, "cross_entropy", (logits, targets), {})
    assert plain["label_smoothing"] == (0.0, "F.cross_entropy default")
    assert plain["ignore_index"] == (-100, "F.cross_entropy default")
    smooth = S.loss_call(F.cross_entropy, "cross_entropy", (logits, targets), {"label_smoothing": 0.1,
                                                                                 "reduction": "sum"})
    assert _diff(plain, smooth) == ["reduction: sum (given) vs mean (F.cross_entropy default)",
                                    "label_smoothing: 0.1 (given) vs 0 (F.cross_entropy default)"]


# ------------------------------------------------------------------ the data-flow walk
class _RMSNorm(torch.nn.Module):
    def __init__(self, eps=1e-5, fused_eps=None):
        super().__init__()
        self.eps, self.fused_eps = eps, fused_eps
        self.weight = torch.nn.Parameter(torch.ones(8))

    def forward(self, x):
        if self.fused_eps is not None:  # the "port": one fused call
            return F.rms_norm(x, (8,), self.weight, eps=self.fused_eps)
        return self.weight * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps))


class _Block(torch.nn.Module):
    def __init__(self, *, repeat="interleave", sign=1.0, base=10000.0, fused_eps=None):
        super().__init__()
        self.norm = _RMSNorm(fused_eps=fused_eps)
        self.proj = torch.nn.Linear(8, 8)
        self.repeat, self.sign = repeat, sign
        angles = torch.arange(4.0)[:, None] / base ** (torch.arange(4.0) / 4)  # a RoPE-like cache built at init
        self.register_buffer("cos", angles.cos(), persistent=False)

    def forward(self, x):  # x (1, 4, 8)
        h = self.proj(self.norm(x))
        h = h + self.sign * h.roll(1, -1)  # element-wise code before the "attention"
        kv = h.view(1, 4, 2, 4) * self.cos[None, :, None, :]
        kv = kv.repeat_interleave(2, dim=2) if self.repeat == "interleave" else kv.repeat(1, 1, 2, 1)
        return kv.sum(-1)


def _trace(tmp_path, name, **kw):
    from safetensors.torch import save_file

    from migrator.validation.child.optrace import OpTracer

    torch.manual_seed(0)
    model = _Block(**kw)
    x = torch.randn(1, 4, 8, generator=torch.Generator().manual_seed(1)) * 0.02
    buffers = {f"buffer.{n}": b.clone() for n, b in model.named_buffers()}
    with OpTracer(model, "_root") as tracer, torch.no_grad():
        model(x)
    out = tmp_path / name
    out.mkdir()
    save_file({**tracer.tensors, **buffers}, str(out / "ops.safetensors"))
    (out / "ops.json").write_text(json.dumps({"events": tracer.events, "modules": tracer.modules}))
    return str(out)


@pytest.mark.parametrize(("slip", "migrated_op", "expected"), [
    ({"sign": -1.0}, "mul", "arguments: mul(-1.0) (migrated) vs mul(1.0) (original)"),
    ({"repeat": "tile"}, "repeat", "in another order (head layout / KV-head repeat order)"),
    ({"base": 1000.0}, "buffer cos", "buffer cos differs after model build, before the first step"),
    ({"fused_eps": 1e-6}, "rms_norm", "eps: 1e-06 (given) vs 1e-05 (the original _RMSNorm.eps)"),
])
def test_walk_back_names_the_first_op_whose_inputs_agree(tmp_path, slip, migrated_op, expected):
    from migrator.validation.parent.localisation.ops import first_divergent_op

    original = _trace(tmp_path, "original")
    migrated = _trace(tmp_path, "migrated", **slip)
    found = first_divergent_op(original, migrated, "fp32")
    text = json.dumps(found)
    assert found["migrated_op"].startswith(migrated_op), found
    assert expected in text, found
    assert first_divergent_op(original, _trace(tmp_path, "same"), "fp32")["migrated_op"] is None
    assert first_divergent_op(original, _trace(tmp_path, "fused", fused_eps=1e-5), "fp32")["migrated_op"] is None


# ------------------------------------------------------------------ training-step phases
def _train(tmp_clip=1.0, unscale=True, accum_div=2, zero=True):
    from migrator.validation.child.phase_probe import PhaseProbe

    torch.manual_seed(0)
    model = torch.nn.Linear(4, 2)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    scaler = torch.amp.GradScaler("cpu", init_scale=8.0)
    backward = torch.Tensor.backward
    probe = PhaseProbe(model, opt, scaler).attach()
    x = torch.randn(3, 4, generator=torch.Generator().manual_seed(2))
    for step in range(3):
        loss = model(x * (step + 1)).pow(2).sum()
        scaler.scale(loss / accum_div).backward()
        if step % 2 == 1:
            if unscale:
                scaler.unscale_(opt)
            torch.nn.utils.clip_grad_norm_(model.parameters(), tmp_clip)
            scaler.step(opt)
            scaler.update()
            if zero:
                opt.zero_grad(set_to_none=True)
        probe.next_step()
    events = probe.detach()
    assert torch.Tensor.backward is backward and "step" not in vars(opt)  # every patch undone
    return {"phases": events}


def test_phase_probe_notes_the_steps_phases_in_order():
    phases = _train()["phases"]
    assert [(e["step"], e["phase"]) for e in phases] == [
        (0, "backward"), (1, "backward"), (1, "unscale"), (1, "clip"), (1, "step"), (1, "zero_grad"), (2, "backward")]
    assert phases[3]["args"] == {"fn": "clip_grad_norm_", "max_norm": 1.0}


def test_phase_cause_names_the_phase_and_argument():
    import json

    from migrator.validation import records
    from migrator.validation.facts import TrainingFacts
    from migrator.validation.parent.comparison import phases

    def cause(original, migrated):
        """The phases as the child's status carries them (JSON), read strictly as the parent does."""
        def read(facts):
            return records.from_json(json.loads(json.dumps({"steps": 3, "dir": "train", **facts})), TrainingFacts)

        return phases.cause(read(original), read(migrated))

    good = _train()
    assert cause(good, _train()) is None
    clip = cause(good, _train(tmp_clip=0.01))
    assert clip.startswith("training step phase clip (clip_grad_norm_) in step 1: grads agree before it and differ")
    assert "max_norm=0.01 (migrated) vs max_norm=1.0 (original)" in clip
    accumulate = cause(good, _train(accum_div=1))
    assert accumulate.startswith("training step phase accumulate (loss.backward() (gradient accumulation)) in step 0")
    assert "x2" in accumulate
    order = cause(good, _train(unscale=False))  # GradScaler.step unscales after the clip
    assert order.startswith("training step phases differ in step 1: clip (clip_grad_norm_) runs where the original "
                            "runs unscale (scaler.unscale_)")
    assert "zero_grad (optimizer.zero_grad) missing on the migrated side" in cause(good, _train(zero=False))


def test_fused_rotary_mode_is_checked_against_the_replaced_modules_attribute():
    from migrator.validation.parent.localisation.dataflow import _attribute_lines

    x = torch.zeros(1, 4, 2, 8)
    fused = S.npu_rotary_mul("npu_rotary_mul", (x, x, x), {})  # npu default: rotate-half
    interleaved = {"class": "GPTJRotary", "interleaved": True}
    assert _attribute_lines(fused, interleaved) == [
        "rotary mode: half (npu default) vs interleave (the original GPTJRotary.interleaved)"]
    assert _attribute_lines(S.npu_rotary_mul("npu_rotary_mul", (x, x, x, "interleave"), {}), interleaved) == []


def test_a_trace_over_its_byte_budget_links_ops_without_blaming_them(tmp_path):
    from safetensors.torch import save_file

    from migrator.validation.child.optrace import OpTracer
    from migrator.validation.parent.localisation.ops import first_divergent_op

    dirs = []
    for name, sign in (("original", 1.0), ("migrated", -1.0)):
        model = _Block(sign=sign)
        with OpTracer(model, "_root", max_bytes=0) as tracer, torch.no_grad():
            model(torch.ones(1, 4, 8))
        assert tracer.events and not tracer.tensors
        out = tmp_path / name
        out.mkdir()
        save_file({"buffer.cos": model.cos}, str(out / "ops.safetensors"))
        (out / "ops.json").write_text(json.dumps({"events": tracer.events, "modules": tracer.modules}))
        dirs.append(str(out))
    assert first_divergent_op(*dirs, "fp32")["migrated_op"] is None
