"""One real PyPI package end to end, through the corpus benchmark's own code (bench/real_repos.py):
no crash, no internal error, every written file parses, no CUDA-free file touched, `fix --check`
clean and a second fix changes nothing (the record included); and on the same scan and fix, what scan
calls fixable is exactly what fix applies, with no site still claiming a fix after it
(bench/fix_agreement.py, as tests/fix/test_scan_fix_agreement.py checks the fixtures and samples).
One scan and fix of the package per target serve both. Skips when PyPI is unreachable."""

from __future__ import annotations

from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"


@pytest.mark.network
@pytest.mark.slow
@pytest.mark.parametrize("target", ["npu", "portable"])
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
