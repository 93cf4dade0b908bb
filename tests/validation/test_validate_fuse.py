"""`migrate fix --fuse` output checked by `migrate validate` (issue 42 item 2), end to end on the four
fusion fixtures: the rewritten program passes S1 on CPU (the emulation makes `Tensor.is_npu` true on the
migrated side, so the fused branch runs there), and a seeded wrong argument in the rewrite (eps, rotary
mode, scale, SwiGLU's half order) fails S1 naming that argument."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("safetensors")

FIXTURES = Path(__file__).resolve().parents[1] / "census" / "programs" / "fusion"
# (fixture, text of the correct rewrite, the seeded wrong argument, what the failure must say)
SLIPS = {
    "rms_norm": ("epsilon=self.variance_epsilon", "epsilon=1e-06",
                 ("RMSNorm eps: the port uses 1e-06", "pass epsilon=1e-05")),
    "rope": ("rotary_mode='half'", "rotary_mode='interleave'",
             ("rotary layout: the port uses interleaved pairs (GPT-J), the original rotate-half (NeoX)",
              'pass rotary_mode="half"')),
    "attention": ("scale=1.0 / math.sqrt(k.size(-1))", "scale=1.0",
                  ("scale: the port uses 1.0", "pass scale=1/math.sqrt(head_dim)")),
    "swiglu": ("npu_swiglu(self.gate_up(x), dim=-1)",
               "npu_swiglu(torch.cat(self.gate_up(x).chunk(2, dim=-1)[::-1], dim=-1), dim=-1)",
               # gate and up are halves of one projection here (`gate_up`): "half", not "projection"
               ("SwiGLU halves swapped: the port activates the up half", "put gate first")),
}


def _fused(tmp_path: Path, name: str) -> Path:
    from migrator import api

    tree = tmp_path / f"{name}-fused"
    shutil.copytree(FIXTURES / name, tree)
    outcome = api.fix([tree], root=tree, use_cache=False, fuse=True, record=False)
    assert [e.code for c in outcome.plan.changes for e in c.edits], f"{name}: nothing fused"
    return tree


def _validate(name: str, migrated: Path):
    from migrator import api

    return api.validate(FIXTURES / name, migrated=str(migrated), stages=("S1",), steps=(0,))


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(SLIPS))
def test_the_fused_rewrite_passes_s1(tmp_path, name):
    result = _validate(name, _fused(tmp_path, name))
    assert result.exit_code == 0 and result.stage("S1").status in ("pass", "warn"), result.text()


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(SLIPS))
def test_a_wrong_argument_in_the_rewrite_fails_naming_it(tmp_path, name):
    right, wrong, phrases = SLIPS[name]
    tree = _fused(tmp_path, name)
    source = tree / "validate.py"
    text = source.read_text()
    assert right in text, f"{name}: the rewrite no longer holds {right!r}"
    source.write_text(text.replace(right, wrong))
    result = _validate(name, tree)
    out = result.text()
    assert result.exit_code == 1 and result.stage("S1").status == "fail", out
    for phrase in phrases:
        assert phrase in out, f"{name}: expected {phrase!r} in\n{out}"
