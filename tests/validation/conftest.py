"""Session fixtures for the `migrate validate` tests: migrated copies of the samples and recorded
reference sides, built once per test run and shared by every pytest-xdist worker (a file lock in
the run's common temporary folder; the first worker to ask builds, the others wait and reuse)."""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SAMPLES = REPO / "samples"
PROGRAMS = Path(__file__).resolve().parent / "programs"  # program families samples/ lacks


@pytest.fixture(scope="session")
def validate_tmp(tmp_path_factory) -> Path:
    """The run's folder for shared trees: under xdist each worker's basetemp is a sub-folder of one
    common folder, which every worker sees; without xdist the session's basetemp."""
    base = tmp_path_factory.getbasetemp()
    shared = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base
    folder = shared / "validate-shared"
    folder.mkdir(exist_ok=True)
    return folder


def _once(dest: Path, build: Callable[[Path], None]) -> Path:
    """Build ``dest`` the first time any worker asks; a build that failed half-way is redone."""
    from filelock import FileLock

    done = dest.with_name(dest.name + ".done")
    with FileLock(str(dest) + ".lock"):
        if not done.exists():
            shutil.rmtree(dest, ignore_errors=True)
            build(dest)
            done.touch()
    return dest


def _migrate(sample: str, dest: Path, base: Path = SAMPLES) -> None:
    from migrator import api

    api.fix([base / sample], root=base / sample, target="npu", out_dir=dest, use_cache=False)


@pytest.fixture(scope="session")
def migrated_gpt(validate_tmp) -> Path:
    """`migrate fix --target npu` of samples/gpt: the correct migration the mutations start from."""
    return _once(validate_tmp / "gpt-migrated", lambda dest: _migrate("gpt", dest))


@pytest.fixture(scope="session")
def migrated_moe(validate_tmp) -> Path:
    return _once(validate_tmp / "moe-migrated", lambda dest: _migrate("moe", dest))


def _record(sample: str, dest: Path, base: Path = SAMPLES, **options) -> None:
    from migrator import api

    result = api.validate(base / sample, record=str(dest), stages=("S1",), **options)
    assert result.exit_code == 0, result.text()


@pytest.fixture(scope="session")
def gpt_reference(validate_tmp) -> Path:
    """The original side of samples/gpt (G fp32, R bf16, weights, batches), recorded once (seed 0)."""
    return _once(validate_tmp / "gpt-reference", lambda dest: _record("gpt", dest))


@pytest.fixture(scope="session")
def moe_reference(validate_tmp) -> Path:
    return _once(validate_tmp / "moe-reference", lambda dest: _record("moe", dest))


@pytest.fixture(scope="session")
def migrated_gqa(validate_tmp) -> Path:
    """`migrate fix --target npu` of tests/validation/programs/gqa."""
    return _once(validate_tmp / "gqa-migrated", lambda dest: _migrate("gqa", dest, PROGRAMS))


@pytest.fixture(scope="session")
def hand_gqa(validate_tmp, migrated_gqa) -> Path:
    """The correct hand port of programs/gqa (fused RMSNorm, additive mask): the base of its slips."""
    from mutations_gqa import HAND_PORT

    return _once(validate_tmp / "gqa-hand", lambda dest: HAND_PORT.apply(migrated_gqa, dest))


@pytest.fixture(scope="session")
def gqa_reference(validate_tmp) -> Path:
    """One S1 step (the program has no step-dependent path): each slip's run costs less."""
    return _once(validate_tmp / "gqa-reference", lambda dest: _record("gqa", dest, PROGRAMS, steps=(0,)))
