"""`migrate validate` on three program families it was not built on (issue 37 item 7,
tests/validation/families): a Mamba selective-scan LM, a Swin shifted-window stage and a picotron-style
tensor-parallel decoder (S1 and S3). Each family's `migrate fix` port, hand port to the torch_npu fused
ops and algebraically equal refactors must pass; each seeded slip (init, buffers, optimizer, masks,
fused-op arguments, tensor-parallel plumbing) must fail naming its cause. The original side is recorded
once per family and test run (shared by the xdist workers); every variant compares one step against it."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("safetensors")

from tests.validation.families import harness, mamba, swin, tensor_parallel  # noqa: E402

FAMILIES = {f.name: f for f in (mamba.FAMILY, swin.FAMILY, tensor_parallel.FAMILY)}
# open findings of bench/README.md's "Unseen program families" (strict: a fix makes them fail loudly)
KNOWN: dict[tuple[str, str], str] = {}
CASES = [pytest.param(f.name, v.name, id=f"{f.name}-{v.name}",
                      marks=[pytest.mark.xfail(strict=True, reason=KNOWN[(f.name, v.name)])]
                      if (f.name, v.name) in KNOWN else [])
         for f in FAMILIES.values() for v in f.variants]


OUTCOMES: dict[tuple[str, str], harness.Outcome] = {}  # this worker's runs: the hand port's two tests share one


def _outcome(validate_tmp: Path, family_name: str, variant_name: str, tmp_path_factory) -> harness.Outcome:
    """One variant against its family's original, recorded once per test run (every xdist worker reuses it)."""
    from tests.validation.conftest import _once

    if (family_name, variant_name) not in OUTCOMES:
        family = FAMILIES[family_name]
        shared = _once(validate_tmp / f"family-{family_name}", lambda dest: harness.record(family, dest))
        root = tmp_path_factory.mktemp(f"{family_name}-{variant_name}")
        OUTCOMES[family_name, variant_name] = harness.run_variant(
            family, family.variant(variant_name), root, shared / "original", shared / "reference")
    return OUTCOMES[family_name, variant_name]


@pytest.mark.parametrize("family_name", [pytest.param(name, marks=[pytest.mark.xfail(strict=True, reason=KNOWN[(name, "hand_port")])]
                                                      if (name, "hand_port") in KNOWN else []) for name in FAMILIES])
def test_the_hand_port_passes(family_name, validate_tmp, tmp_path_factory):
    outcome = _outcome(validate_tmp, family_name, "hand_port", tmp_path_factory)
    assert outcome.got == "pass", f"{family_name}: a correct hand port failed {outcome.stage}: {outcome.cause}"


@pytest.mark.slow
@pytest.mark.parametrize(("family_name", "variant_name"), CASES)
def test_each_variant_gets_its_verdict_and_cause(family_name, variant_name, validate_tmp, tmp_path_factory):
    case = (family_name, variant_name)
    outcome = _outcome(validate_tmp, *case, tmp_path_factory)
    variant = outcome.variant
    assert outcome.got == variant.expected, f"{case} ({variant.what}): expected {variant.expected}, got {outcome.got} " \
                                            f"in {outcome.stage}: {outcome.cause}"
    for phrase in variant.cause:
        assert phrase in outcome.cause, f"{case} ({variant.what}): {phrase!r} not in the named cause {outcome.cause!r}"


def test_every_variant_applies_to_its_family(tmp_path):
    """Guards against a silently empty suite: every edit finds its text, every slip names a cause."""
    for family in FAMILIES.values():
        kinds = {v.kind for v in family.variants}
        assert kinds == {"fix", "hand", "refactor", "slip"}, family.name
        assert sum(v.kind == "refactor" for v in family.variants) >= 3, family.name
        for variant in family.variants:
            if variant.kind == "fix":
                continue
            harness.write_variant(family, variant, tmp_path / family.name / variant.name, tmp_path)
            assert variant.kind != "slip" or (variant.cause and variant.category), variant.name
        assert "licen" in family.source.lower() or "(" in family.source, family.name
