"""Catalogue examples with a `fixed` text: `migrate fix` must produce exactly that text."""

from __future__ import annotations

import pytest

from migrator.catalogue.loader import load_catalogue
from tests.rules.examples import fix_example, without_helpers

CASES = [
    pytest.param(rule, ex, id=f"{rule.code}-{i}")
    for rule in load_catalogue().rules.values()
    for i, ex in enumerate(rule.invalid)
    if ex.fixed is not None
]


@pytest.mark.parametrize("rule, example", CASES)
def test_fixed_example(tmp_path, rule, example):
    """The rewrite of the site, exactly; the runtime helpers the fix inserts are left out of `fixed:`."""
    after, outcome = fix_example(tmp_path, example.code, example.file, example.target)
    assert without_helpers(after) == example.fixed
    assert [e for c in outcome.plan.changes for e in c.edits if e.code == rule.code], "no edit of the rule itself"


def test_every_fixed_text_in_the_yaml_is_a_case():
    """The loader keeps each `fixed:` text of the YAML (none is silently dropped), and each one is a real
    rewrite of its example, so every case above checks an edit."""
    import yaml

    from migrator.catalogue.loader import catalogue_files

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
