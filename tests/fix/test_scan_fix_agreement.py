"""What `scan` calls fixable is exactly what `fix` does (bench/fix_agreement.py): over every fixture and
sample, the sites scan marks fixable equal the edits fix applies, and a re-scan after the fix shows no
site that still claims a fix. The pinned real package's agreement is checked on the same scan and fix as
its clean fix (tests/fix/test_real_repo_network.py)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"
sys.path.insert(0, str(BENCH))
import fix_agreement  # noqa: E402

TREES = fix_agreement.local_trees()


@pytest.mark.parametrize("target", ["npu", "portable"])
@pytest.mark.parametrize("tree", TREES, ids=[t.relative_to(fix_agreement.REPO).as_posix() for t in TREES])
def test_scan_claims_exactly_what_fix_applies(tmp_path, tree, target):
    report = fix_agreement.measure(tree, target, tmp_path)
    assert report.agrees, "\n".join(report.examples())


@pytest.mark.parametrize("target", ["npu", "portable"])
def test_every_syntax_shape_agrees(tmp_path, target):
    """Star imports, `case` patterns, f-strings, decorators ...: scan knows where fix must decline."""
    from tests.fix.programs import HEADER, shapes_for

    program = tmp_path / "shapes.py"
    program.write_text(HEADER + "\n\n".join(shapes_for().values()))
    report = fix_agreement.measure(program, target, tmp_path / "run")
    assert report.claimed and report.agrees, "\n".join(report.examples())


def test_the_agreement_check_can_fail(tmp_path):
    report = fix_agreement.Agreement("t", "npu", claimed={("a.py", "DEV001", 1, 1)}, applied=set())
    assert not report.agrees and report.claimed_not_applied == {("a.py", "DEV001", 1, 1)}


def test_the_fixtures_and_samples_have_fixable_sites(tmp_path):
    report = fix_agreement.measure(fix_agreement.REPO / "samples" / "gpt", "npu", tmp_path)
    assert report.claimed and report.applied == report.claimed
