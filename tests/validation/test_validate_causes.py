"""`migrate validate` names the cause, not only the stage: slips on the GQA/RoPE/RMSNorm/padding-mask
program family (tests/validation/mutations_gqa.py) each fail S1 with their op or training-step
phase and argument named, and both correct ports (``migrate fix``'s and the fused hand port) pass.
Every run compares against the original side recorded once (session fixture)."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("safetensors")

from mutations_gqa import SLIPS  # noqa: E402

PROGRAM = Path(__file__).resolve().parent / "programs" / "gqa"


def _validate(tree: Path, reference: Path):
    from migrator import api

    return api.validate(PROGRAM, migrated=str(tree), compare=str(reference), stages=("S1",), steps=(0,))


@pytest.mark.slow
@pytest.mark.parametrize("slip", SLIPS, ids=[s.mutation.name for s in SLIPS])
def test_slip_fails_s1_naming_its_cause(slip, hand_gqa, gqa_reference, tmp_path):
    m = slip.mutation
    result = _validate(m.apply(hand_gqa, tmp_path / m.name), gqa_reference)
    stage = result.stage("S1")
    assert stage.status == "fail" and result.exit_code == 1, f"{m.name} ({m.what}) not caught:\n{result.text()}"
    where = stage.first_divergence or ""
    assert m.module in where, f"{m.name}: localised to {where!r}, expected {m.module!r}"
    for part in slip.op:
        assert part in where, f"{m.name}: cause {where!r}, expected {part!r}"


@pytest.mark.slow
@pytest.mark.parametrize("port", ["migrated_gqa", "hand_gqa"])
def test_correct_ports_pass(port, request, gqa_reference):
    result = _validate(request.getfixturevalue(port), gqa_reference)
    assert result.stage("S1").status in ("pass", "warn"), result.text()
    assert result.exit_code == 0


def test_every_slip_applies_to_the_hand_port(hand_gqa, tmp_path):
    """Guards against a silently empty suite: every edit still finds its text."""
    for slip in SLIPS:
        slip.mutation.apply(hand_gqa, tmp_path / slip.mutation.name)
