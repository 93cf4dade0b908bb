"""`migrate validate` names a fused op's cause in the user's words (issue 37 item 6), end to end on a
tiny eager block hand-ported to torch_npu's fused ops (:mod:`tests.validation.fused_slips`): each
seeded slip (scale omitted, mask omitted or inverted, SwiGLU halves swapped, rotary mode, RMSNorm
eps) fails S1 with its cause phrase in the output; the correct port passes. The original side is
recorded once; each run compares one step against it."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("safetensors")

from tests.conftest import run_cli  # noqa: E402
from tests.validation import fused_slips as F  # noqa: E402


@pytest.fixture(scope="module")
def recorded(tmp_path_factory) -> tuple[Path, Path, Path]:
    """(folder, the original tree, its recorded reference side)."""
    from migrator import api

    root = tmp_path_factory.mktemp("fused-causes")
    original = F.write(root, "original")
    reference = root / "reference"
    result = api.validate(original, record=str(reference), stages=("S1",), steps=(0,))
    assert result.exit_code == 0, result.text()
    return root, original, reference


def _validate(recorded, tree: Path):
    from migrator import api

    _, original, reference = recorded
    return api.validate(original, migrated=str(tree), compare=str(reference), stages=("S1",), steps=(0,))


@pytest.mark.slow
@pytest.mark.parametrize("slip", [s for s in F.SLIPS if s.name != "scale_omitted"],
                         ids=[s.name for s in F.SLIPS if s.name != "scale_omitted"])
def test_a_slip_fails_naming_its_cause(recorded, slip):
    result = _validate(recorded, F.write(recorded[0], slip.name, *slip.edits, port=True))
    text = result.text()
    assert result.exit_code == 1 and result.stage("S1").status == "fail", f"{slip.name} ({slip.what}):\n{text}"
    for phrase in slip.cause:
        assert phrase in text, f"{slip.name}: expected {phrase!r} in\n{text}"


@pytest.mark.slow
def test_the_cli_blames_an_omitted_scale_not_the_mask_builder(recorded):
    """Through `python -m migrator validate`: exit 1, the scale named in words, not the port's triu."""
    root, original, reference = recorded
    slip = next(s for s in F.SLIPS if s.name == "scale_omitted")
    tree = F.write(root, "cli-" + slip.name, *slip.edits, port=True)
    proc = run_cli("validate", str(original), "--migrated", str(tree), "--compare", str(reference),
                   "--stages", "S1", "--steps", "0", "-q")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    for phrase in slip.cause:
        assert phrase in proc.stdout, proc.stdout
    assert "first divergent op inside block.attn: npu_fusion_attention (migrated)" in proc.stdout, proc.stdout


@pytest.mark.slow
def test_the_correct_port_passes(recorded):
    result = _validate(recorded, F.write(recorded[0], "port", port=True))
    assert result.exit_code == 0 and result.stage("S1").status in ("pass", "warn"), result.text()
    assert not result.stage("S1").first_divergence


def test_every_slip_applies_to_the_port(tmp_path):
    """Guards against a silently empty suite: every edit still finds its text in the port."""
    for slip in F.SLIPS:
        F.write(tmp_path, slip.name, *slip.edits, port=True)
