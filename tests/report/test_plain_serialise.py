"""`to_data` writes without cattrs what the cattrs converter's `unstructure` writes (ground/serialise.py)."""

from __future__ import annotations

import shutil
from enum import Enum
from pathlib import Path
from typing import Any

import pytest

from migrator import api
from migrator.ground.fix_record import FixRecord
from migrator.ground.model import RunResult
from migrator.ground.safe_text import dumps
from migrator.ground.serialise import converter, to_data

ROOT = Path(__file__).resolve().parents[2]


def _typed(value: Any) -> Any:
    """`value` with each container's and scalar's type, so a tuple is no list and 1 no True."""
    if isinstance(value, dict):
        return ("dict", [(_typed(k), _typed(v)) for k, v in value.items()])
    if isinstance(value, (list, tuple)):
        return (type(value).__name__, [_typed(v) for v in value])
    if isinstance(value, Enum):
        return ("enum", value.value)
    return (type(value).__name__, value)


def _same(obj: object) -> None:
    plain, cattrs = to_data(obj), converter().unstructure(obj)
    assert _typed(plain) == _typed(cattrs)
    assert dumps(plain, indent=2) == dumps(cattrs, indent=2)


@pytest.fixture(scope="module")
def fixed_tree(tmp_path_factory: pytest.TempPathFactory) -> tuple[RunResult, Path]:
    """One scan of the samples and the rule fixtures, and the samples fixed (a fix record)."""
    tree = tmp_path_factory.mktemp("plain") / "tree"
    shutil.copytree(ROOT / "samples", tree / "samples")
    shutil.copytree(ROOT / "tests" / "fixtures", tree / "fixtures")
    result = api.scan([tree], root=tree)
    api.fix([tree / "samples"], root=tree)
    return result, tree


def test_a_scan_result_is_written_as_the_converter_writes_it(fixed_tree: tuple[RunResult, Path]) -> None:
    result, _ = fixed_tree
    assert result.findings and any(f.fix is None for f in result.findings) and any(f.fix for f in result.findings)
    assert result.summary.coverage is not None and result.summary.coverage.ops
    _same(result)


def test_a_fix_record_is_written_as_the_converter_writes_it(fixed_tree: tuple[RunResult, Path]) -> None:
    from migrator.ground.fix_record import load

    record = load(fixed_tree[1] / ".migrate" / "fix-record.json")
    assert isinstance(record, FixRecord) and record.files
    _same(record)
    _same(FixRecord())  # every field at its default
