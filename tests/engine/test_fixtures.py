"""Fixture files found by glob (TorchFix style).

`tests/fixtures/<family>/<case>.py` + `<case>.txt` (one `line:col CODE` per expected finding), or a
case folder `<case>/` + `<case>.txt` (one `path:line:col CODE`; `path:cell N:line:col CODE` for a
notebook cell). Every finding must be expected and every expectation found.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from migrator import api

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
CASES = sorted(p for p in FIXTURES.glob("*/*.txt"))


def _expected(case: Path) -> set[str]:
    return {line.strip() for line in case.read_text().splitlines() if line.strip() and not line.startswith("#")}


@pytest.mark.parametrize("case", CASES, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_fixture(case: Path):
    folder = case.with_suffix("")
    if folder.is_dir():
        result = api.scan([folder], root=folder, use_cache=False)
        got = {f"{f.location()} {f.code}" for f in result.findings}  # notebooks: path:cell N:line:col
    else:
        source = case.with_suffix(".py")
        result = api.scan([source], root=source.parent, use_cache=False)
        got = {f"{f.line}:{f.column} {f.code}" for f in result.findings}
    expected = _expected(case)
    assert sorted(got - expected) == [], "unexpected findings"
    assert sorted(expected - got) == [], "expected findings not reported"
