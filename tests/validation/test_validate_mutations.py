"""Proof that `migrate validate` detects real migration bugs.

Each seeded bug (tests/validation/mutations.py) is a text edit to the output of `migrate fix` on
samples/gpt (samples/moe for expert parallelism). Every one must fail the first stage that can
see it, localised to the right module, while the stages before it still pass; the correct
migration passes. The original side is recorded once per sample (session fixtures, shared by the
xdist workers) and every mutation is compared against it (`--compare`), running only up to the stage
that must catch it. Each mutation is its own test and its own run, so `pytest -n auto` spreads them
over the workers (one fixture running them all was built once per worker, twice the work).
"""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("safetensors")

from mutations import MUTATIONS  # noqa: E402  (tests/validation is on sys.path via rootdir conftest)

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.slow
@pytest.mark.parametrize("mutation", MUTATIONS, ids=[m.name for m in MUTATIONS])
def test_mutation_fails_its_stage_localised(mutation, request, tmp_path):
    from migrator import api

    tree = mutation.apply(request.getfixturevalue(f"migrated_{mutation.sample}"), tmp_path / mutation.name)
    stages = ("S1",) if mutation.stage == "S1" else ("S1", mutation.stage)
    original = REPO / "samples" / mutation.sample
    if mutation.script:
        result = api.validate(original, migrated=str(tree), script="train.py", script_args=mutation.script,
                              curve_steps=2, stages=stages)
    else:
        reference = request.getfixturevalue(f"{mutation.sample}_reference")
        result = api.validate(original, migrated=str(tree), compare=str(reference), stages=stages)
    stage = result.stage(mutation.stage)
    assert stage.status == mutation.status, f"{mutation.name} ({mutation.what}) not caught:\n{result.text()}"
    if mutation.check:
        rows = [c for c in stage.checks if mutation.check in c["check"]]
        assert rows and rows[0]["status"] == mutation.status, stage.checks
    if mutation.status == "warn":
        assert result.exit_code == 0
        return
    assert result.exit_code == 1
    if mutation.stage != "S1":
        assert result.stage("S1").status in ("pass", "warn"), "S1 cannot see this bug; it must still pass"
    where = stage.first_divergence or ""
    assert mutation.module in where, f"{mutation.name}: localised to {where!r}, expected {mutation.module!r}"
    assert mutation.op in where, f"{mutation.name}: first divergent op {where!r}, expected {mutation.op!r}"
    if mutation.passes:
        rows = [c for c in stage.checks if mutation.passes in c["check"]]
        assert rows and all(c["status"] == "pass" for c in rows), stage.checks
    assert stage.reason
    # the result is a valid validation JSON whatever happens
    doc = result.to_json()
    assert doc["stages"][int(mutation.stage[1])]["status"] == "fail"


def test_every_mutation_applies_to_the_current_rewriter_output(migrated_gpt, migrated_moe, tmp_path):
    """Guards against a silently empty suite: every edit still finds its text in `migrate fix`'s output."""
    trees = {"gpt": migrated_gpt, "moe": migrated_moe}
    for m in MUTATIONS:
        m.apply(trees[m.sample], tmp_path / m.name)


@pytest.mark.slow
@pytest.mark.parametrize("seed", [1, 2])
def test_correct_migration_passes_s1_for_other_seeds(migrated_gpt, seed):
    from migrator import api

    result = api.validate(REPO / "samples" / "gpt", migrated=str(migrated_gpt), stages=("S1",), seed=seed)
    assert result.stage("S1").status in ("pass", "warn"), result.text()
    assert result.exit_code == 0


@pytest.mark.slow
def test_correct_migration_passes_s1_seed0_against_the_recording(migrated_gpt, gpt_reference):
    from migrator import api

    result = api.validate(REPO / "samples" / "gpt", migrated=str(migrated_gpt), compare=str(gpt_reference),
                          stages=("S1",))
    s1 = result.stage("S1")
    assert s1.status in ("pass", "warn"), result.text()
    checks = {c["check"]: c for c in s1.checks}
    assert checks["fp32 logic (T32 vs G, rel_l2)"]["worst"] <= 1e-5
    assert any(c.startswith("optimizer in isolation") for c in checks)
