"""Fixture pairs per transform and target: `<case>.in.py` -> `<case>.npu.py` / `<case>.portable.py`.

Regenerate after a reviewed change with `UPDATE_GOLDEN=1 python -m pytest tests/fix/test_fix_fixtures.py`
and read the diff like code.
"""

from __future__ import annotations

import ast
import os
from pathlib import Path

import pytest

from migrator import api

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "fix"
CASES = sorted(p.name[: -len(".in.py")] for p in FIXTURES.glob("*.in.py"))
TARGETS = ("npu", "portable")


def _fix_copy(tmp_path: Path, name: str, text: str, target: str) -> str:
    work = tmp_path / target
    work.mkdir(exist_ok=True)
    (work / "pyproject.toml").write_text("")
    path = work / f"{name}.py"
    path.write_text(text)
    api.fix([path], root=work, target=target, use_cache=False)
    return path.read_text()


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("case", CASES)
def test_fix_matches_expected_and_is_idempotent(tmp_path, case, target):
    source = (FIXTURES / f"{case}.in.py").read_text()
    expected_path = FIXTURES / f"{case}.{target}.py"
    got = _fix_copy(tmp_path, case, source, target)
    ast.parse(got)
    if os.environ.get("UPDATE_GOLDEN"):
        expected_path.write_text(got)
    assert got == expected_path.read_text()
    again = _fix_copy(tmp_path / "again", case, got, target) if (tmp_path / "again").mkdir() is None else None
    assert again == got, "fixing the fixed output changed it again"
