"""Catalogue examples with a `fixed` text: `migrate fix` must produce exactly that text."""

from __future__ import annotations

import pytest

from migrator import api
from migrator.rules.catalogue import load_catalogue

CASES = [
    pytest.param(rule, ex, id=f"{rule.code}-{i}")
    for rule in load_catalogue().rules.values()
    for i, ex in enumerate(rule.invalid)
    if ex.fixed is not None
]


@pytest.mark.parametrize("rule, example", CASES)
def test_fixed_example(tmp_path, rule, example):
    (tmp_path / "pyproject.toml").write_text("")
    path = tmp_path / example.file
    path.write_text(example.code)
    api.fix([path], root=tmp_path, target=example.target, use_cache=False)
    assert path.read_text() == example.fixed


def test_catalogue_has_fixed_examples():
    assert len(CASES) >= 1
