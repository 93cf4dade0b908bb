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


def test_every_fixed_text_in_the_yaml_is_a_case():
    """The loader keeps each `fixed:` text of the YAML (none is silently dropped), and each one is a real
    rewrite of its example, so every case above checks an edit."""
    import yaml

    from migrator.rules.catalogue import catalogue_files

    written = [
        (rule["code"], ex["fixed"])
        for path in catalogue_files()
        for rule in yaml.safe_load(path.read_text(encoding="utf-8"))["rules"]
        for ex in (rule.get("examples") or {}).get("invalid") or []
        if isinstance(ex, dict) and ex.get("fixed") is not None
    ]
    loaded = [(p.values[0].code, p.values[1].fixed) for p in CASES]
    assert sorted(loaded) == sorted(written)
    assert written, "the catalogue has no `fixed` example: the rewrite of no rule is pinned"
    for p in CASES:
        rule, example = p.values
        assert example.fixed != example.code, f"{rule.code}: `fixed` equals the example, nothing is rewritten"
