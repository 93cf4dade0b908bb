"""Session fixtures for the `migrate validate` tests: migrated copies of the samples and recorded
reference sides, built once and shared (the CI box has 2 cores and a 6-minute budget)."""

from __future__ import annotations

from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SAMPLES = REPO / "samples"


@pytest.fixture(scope="session")
def validate_tmp(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("validate")


def _migrate(sample: str, dest: Path) -> Path:
    from migrator import api

    api.fix([SAMPLES / sample], root=SAMPLES / sample, target="npu", out_dir=dest, use_cache=False)
    return dest


@pytest.fixture(scope="session")
def migrated_gpt(validate_tmp) -> Path:
    """`migrate fix --target npu` of samples/gpt: the correct migration the mutations start from."""
    return _migrate("gpt", validate_tmp / "gpt-migrated")


@pytest.fixture(scope="session")
def migrated_moe(validate_tmp) -> Path:
    return _migrate("moe", validate_tmp / "moe-migrated")


def _record(sample: str, dest: Path) -> Path:
    from migrator import api

    result = api.validate(SAMPLES / sample, record=str(dest), stages=("S1",))
    assert result.exit_code == 0, result.text()
    return dest


@pytest.fixture(scope="session")
def gpt_reference(validate_tmp) -> Path:
    """The original side of samples/gpt (G fp32, R bf16, weights, batches), recorded once (seed 0)."""
    return _record("gpt", validate_tmp / "gpt-reference")


@pytest.fixture(scope="session")
def moe_reference(validate_tmp) -> Path:
    return _record("moe", validate_tmp / "moe-reference")
