"""One real PyPI package end to end, through the corpus benchmark's own code (bench/real_repos.py):
no crash, no internal error, every written file parses, no CUDA-free file touched, `fix --check`
clean and a second fix changes nothing (the record included); and on the same scan and fix, what scan
calls fixable is exactly what fix applies, with no site still claiming a fix after it
(bench/fix_agreement.py, as tests/fix/test_scan_fix_agreement.py checks the fixtures and samples).
One scan and fix of the package per target serve both. Skips when PyPI is unreachable."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import SLOW_E2E

BENCH = Path(__file__).resolve().parents[2] / "bench"


# the portable target's run is nightly (slow-e2e): tests/fix/test_scan_fix_agreement.py (scan claims exactly what
# fix applies) and tests/fix/test_fix_fixtures.py (the expected output, idempotent) assert the same of it on every
# fixture and sample, and the npu run below still takes the real package through the same steps
@pytest.mark.network
@pytest.mark.slow
@pytest.mark.parametrize("target", ["npu", pytest.param("portable", marks=SLOW_E2E)])
def test_real_package_fixes_cleanly_and_as_scan_claimed(tmp_path, target, monkeypatch):
    monkeypatch.syspath_prepend(str(BENCH))
    import real_repos
    from sdists import IndexUnreachable

    package = real_repos.PACKAGES[real_repos.SMALLEST]
    try:
        tree = real_repos.fetch_tree(package.pin)
    except IndexUnreachable as exc:
        pytest.skip(f"PyPI unreachable: {exc}")
    report = real_repos.run_one(package, target, tree, tmp_path, agreement=True)
    assert report.crash is None, report.crash
    assert report.fixes > 0  # the package does have CUDA code to fix
    assert report.internal_errors == []
    assert report.unparsable == []
    assert report.cuda_free_touched == []
    assert report.check_exit == 0, report.check_output
    assert report.non_idempotent == []  # the second fix changes nothing, the fix record included
    agreement = report.agreement
    assert agreement.claimed and agreement.agrees, "\n".join(agreement.examples())
