"""Every example in the rule catalogue runs as a test (as Fixit does)."""

from __future__ import annotations

import pytest

from migrator.catalogue.loader import load_catalogue
from tests.engine.helpers import positions, scan_text

CATALOGUE = load_catalogue()
ADVICE = ("coverage", "fusion", "perf")
INVALID = [
    pytest.param(rule, ex, id=f"{rule.code}-invalid-{i}") for rule in CATALOGUE.rules.values() for i, ex in enumerate(rule.invalid)
]
VALID = [
    pytest.param(rule, ex, id=f"{rule.code}-valid-{i}") for rule in CATALOGUE.rules.values() for i, ex in enumerate(rule.valid)
]


@pytest.mark.parametrize("rule, example", INVALID)
def test_invalid_example_is_reported_where_it_says(tmp_path, rule, example):
    result = scan_text(tmp_path, example.code, name=example.file, select=(rule.code,) if not rule.default_enabled else ())
    found = positions(result, rule.code)
    assert found, f"{rule.code} not reported in:\n{example.code}\n got {[(f.code, f.line, f.column) for f in result.findings]}"
    if example.at:
        assert sorted(found) == sorted(example.at), f"{rule.code} reported at {found}, example says {list(example.at)}"


@pytest.mark.parametrize("rule, example", VALID)
def test_valid_example_is_clean(tmp_path, rule, example):
    """Nothing reported: no finding of the rule itself, nor of any family but op coverage (which
    looks at every torch call, so a valid example may still use a partially supported op) and the
    advice families (a valid `convert_sync_batchnorm` is still SyncBatchNorm to the perf lint)."""
    result = scan_text(tmp_path, example.code, name=example.file)
    # a valid Triton kernel still imports triton: KERN004's warning (install triton-ascend) stays
    summary = {"KERN004"} if (rule.impl or "").startswith("triton-") else set()
    assert [(f.code, f.line, f.column) for f in result.findings
            if f.code == rule.code or (f.family not in ADVICE and f.code not in summary)] == []


def test_every_rule_has_an_invalid_example_or_a_fixture():
    fixture_only = {"KERN003", "KERN021", "MIG002", "ENV010", "ENV011", "OPS008", "OPS009",
                    "PERF011", "PERF012", "PERF013"}  # census findings: tests/rules/test_perf_census.py  # non-Python inputs or a whole tree (KERN021): tests/fixtures covers them
    missing = [r.code for r in CATALOGUE.rules.values() if not r.invalid and r.code not in fixture_only]
    assert missing == []


def test_every_invalid_example_says_where():
    assert [r.code for r in CATALOGUE.rules.values() for ex in r.invalid if not ex.at] == []
