"""Validation that names the cause (issue 24 items 2-4 and 7), end to end on two program families the
samples do not have: a GQA + RoPE + RMSNorm + SwiGLU model hand-ported to fused NPU ops (protocol mode,
:mod:`tests.validation.llama_family`) and a nanoGPT-style amp script (script mode,
``programs/nanogpt_amp_train.py``). Correct ports pass; each seeded slip fails with its cause named."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("safetensors")

from tests.validation import llama_family as L  # noqa: E402

SCRIPT = Path(__file__).parent / "programs" / "nanogpt_amp_train.py"  # nanoGPT-style, with nn.Dropout(0.1)


def _s1(original: Path, migrated: Path):
    from migrator import api

    result = api.validate(original, migrated=str(migrated), stages=("S1",))
    return result, result.stage("S1")


def _row(stage, prefix: str) -> dict:
    return next(c for c in stage.checks if c["check"].startswith(prefix))


# ------------------------------------------------------------------ protocol mode: the fused-op hand port
@pytest.mark.slow
def test_hand_port_to_fused_npu_ops_passes_and_notes_what_was_fused_away(tmp_path):
    """SwiGLU -> npu_swiglu, RMSNorm -> npu_rms_norm, SDPA -> npu_fusion_attention, fp32 GradScaler: a pass;
    the act_fn modules the port fused away are a note, not 'unmatched'."""
    result, s1 = _s1(L.write(tmp_path, "orig", extra=L.SCALER), L.write(tmp_path, "mig", port=True, extra=L.SCALER))
    assert result.exit_code == 0 and s1.status == "pass", result.text(verbose=True)
    assert not s1.unmatched
    assert any("fused away: blocks.0.mlp.act_fn inside blocks.0.mlp" in n for n in s1.notes), s1.notes
    assert _row(s1, "precision policy per side")["status"] == "pass"


@pytest.mark.slow
def test_dropout_on_with_fused_attention_passes_by_the_statistical_check(tmp_path):
    """The attention's own dropout (0.1, not reached by make_model(dropout=0.0)) on both sides, SDPA vs
    npu_fusion_attention(keep_prob=0.9), no make_scaler: neutralised for the numerics (and said so), then the
    statistical check with dropout on passes — never a silent fail."""
    result, s1 = _s1(L.write(tmp_path, "orig", L.ATTN_DROPOUT_ON), L.write(tmp_path, "mig", L.ATTN_DROPOUT_ON, port=True))
    assert result.exit_code == 0 and s1.status == "pass", result.text(verbose=True)
    row = _row(s1, "randomness: dropout")
    assert row["status"] == "pass" and "same sites and rates (blocks.0.attn p=0.1, blocks.1.attn p=0.1)" in row["message"]
    assert any("neutralised on both sides for the numeric checks" in n for n in s1.notes), s1.notes


SLIPS = [
    pytest.param((L.ATTN_DROPOUT_ON, ("keep_prob=1.0 - (ATTN_DROPOUT if self.training else 0.0)",
                                      "keep_prob=0.8 if self.training else 1.0")), (L.ATTN_DROPOUT_ON,), "",
                 "randomness: dropout", "dropout rate differs: blocks.0.attn: p=0.2 (migrated) vs p=0.1 (original)",
                 id="keep_prob-for-dropout_p"),
    pytest.param((), (), L.SCALER.replace("growth_interval=2", "growth_interval=4"), "precision policy",
                 "GradScaler growth_interval 4 (migrated) vs 2 (original)", id="scaler-growth-interval"),
    pytest.param((("torch.cat([self.gate(x), self.up(x)], -1)", "torch.cat([self.up(x), self.gate(x)], -1)"),), (),
                 "", "", "blocks.0.mlp (MLP)", id="swiglu-halves-swapped"),
]


@pytest.mark.slow
@pytest.mark.parametrize("port_edits, both_edits, scaler, check, cause", SLIPS)
def test_a_slip_in_the_hand_port_fails_naming_its_cause(tmp_path, port_edits, both_edits, scaler, check, cause):
    original = L.write(tmp_path, "orig", *both_edits, extra=L.SCALER if scaler else "")
    migrated = L.write(tmp_path, "mig", *port_edits, port=True, extra=scaler)
    result, s1 = _s1(original, migrated)
    assert result.exit_code == 1 and s1.status == "fail", result.text(verbose=True)
    if check:
        row = _row(s1, check)
        assert row["status"] == "fail" and cause in row["message"], row
    else:  # a numeric slip: the first divergence names the module
        assert s1.first_divergence and s1.first_divergence.startswith(cause), s1.first_divergence


# ------------------------------------------------------------------ script mode: nanoGPT-style amp
@pytest.fixture(scope="module")
def amp_trees(tmp_path_factory):
    """The script as the original and its `migrate fix --target npu` copy."""
    from migrator import api

    root = tmp_path_factory.mktemp("amp")
    original = root / "orig"
    original.mkdir()
    shutil.copy(SCRIPT, original / "train.py")
    api.fix([original], root=original, target="npu", out_dir=root / "mig", use_cache=False)
    return original, root / "mig"


def _slip(amp_trees, tmp_path, old: str, new: str) -> Path:
    dest = tmp_path / "slip"
    shutil.copytree(amp_trees[1], dest)
    text = (dest / "train.py").read_text()
    assert old in text, f"{old!r} not in the migrated train.py"
    (dest / "train.py").write_text(text.replace(old, new))
    return dest


@pytest.mark.slow
def test_nanogpt_style_script_fp16_with_scaler_passes_s2_at_a_world_size_it_accepts(amp_trees):
    """`assert gradient_accumulation_steps % world == 0` (3 steps) stops the original at 2 ranks: S2 retries
    at 3 and passes; the fp16 + GradScaler migration passes S1; exit 0."""
    from migrator import api

    result = api.validate(amp_trees[0], migrated=str(amp_trees[1]), script="train.py",
                          script_args=("--dtype", "float16"), stages=("S1", "S2"), curve_steps=2)
    s1, s2 = result.stage("S1"), result.stage("S2")
    assert result.exit_code == 0 and s1.status == "pass" and s2.status == "pass", result.text(verbose=True)
    assert "script x3" in s2.summary and any("the original script fails at 2 ranks" in n for n in s2.notes)
    assert "GradScaler on (init_scale 1024" in _row(s1, "precision policy")["message"]
    dropout = _row(s1, "randomness: dropout")  # the script's own dropout: off on both sides, its sites compared
    assert dropout["status"] == "pass" and dropout["message"] == "same sites and rates (drop p=0.1)", dropout


@pytest.mark.slow
@pytest.mark.parametrize("dtype, old, new, cause", [
    ("bfloat16", '"bfloat16": torch.bfloat16', '"bfloat16": torch.float16',
     "autocast dtype float16 (migrated) vs bfloat16 (original)"),
    ("float16", "init_scale=1024.0", "init_scale=4096.0", "GradScaler init_scale 4096 (migrated) vs 1024 (original)"),
], ids=["fp16-for-bf16", "scaler-init-scale"])
def test_a_precision_slip_in_the_script_fails_naming_the_setting(amp_trees, tmp_path, dtype, old, new, cause):
    from migrator import api

    result = api.validate(amp_trees[0], migrated=str(_slip(amp_trees, tmp_path, old, new)), script="train.py",
                          script_args=("--dtype", dtype), stages=("S1",), curve_steps=2)
    s1 = result.stage("S1")
    row = _row(s1, "precision policy")
    assert result.exit_code == 1 and s1.status == "fail" and row["status"] == "fail", result.text(verbose=True)
    assert cause in row["message"], row
    if dtype == "bfloat16":
        assert "fp16 autocast without a GradScaler" in row["message"]
    else:  # the loss compared is the unscaled one: a scale change is not blamed on the loss
        assert _row(s1, "loss at step 0")["status"] == "pass"
