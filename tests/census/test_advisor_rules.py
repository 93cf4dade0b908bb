"""The advisor's fusion rules (issue 42 item 1): the loader reads the pinned msprof-analyze file and
nothing else, and what it reads is what the file says."""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

import pytest
import yaml

from migrator.census import advisor_rules as A

REPO = Path(__file__).resolve().parents[2]
SHARED = REPO.parent / "shared" / "data" / "msprof-analyze" / "rules" / A.RULE_FILE


def test_the_pinned_hash_is_the_shipped_file():
    assert hashlib.sha256(A.rule_path().read_bytes()).hexdigest() == A.PINNED_SHA256


def test_the_shipped_file_is_a_byte_copy_of_the_shared_data():
    if not SHARED.is_file():
        pytest.skip("the shared data folder is not beside this checkout")
    assert SHARED.read_bytes() == A.rule_path().read_bytes()


def test_the_version_is_the_one_the_sources_note_names():
    sources = (A.rule_path().parent / "SOURCES.md").read_text(encoding="utf-8")
    row = next(line for line in sources.splitlines() if line.startswith(f"| `{A.RULE_FILE}`"))
    assert f"| {A.ADVISOR_VERSION} |" in row and "msprof-analyze" in row


def test_every_aten_pattern_of_the_file_is_loaded_once_with_its_first_entry():
    entries = yaml.safe_load(A.rule_path().read_text(encoding="utf-8"))
    expected: dict[tuple[str, str], str] = {}
    for entry in entries:
        for api, patterns in entry["operator_rules"].get("aten", {}).get("add", {}).items():
            for pattern in patterns:
                expected.setdefault((api, pattern), str(entry["cann_version"]))
    loaded = {(r.fused_api, r.pattern): r.cann_version for r in A.load_rules()}
    assert loaded == expected
    assert len(A.load_rules()) == len(expected)


def test_a_rule_names_its_api_pattern_file_and_versions():
    rule = next(r for r in A.load_rules() if r.fused_api == "torch_npu.npu_rms_norm")
    assert rule.name.startswith("torch_npu.npu_rms_norm: (pow){0,1}-(mean){0,1}-(add){0,1}-rsqrt-mul-(type_as){0,1}")
    assert f"{A.ADVISOR} {A.ADVISOR_VERSION}" in rule.name and "cann_version 7.0.0" in rule.name


def test_pattern_items_are_read_with_their_counts():
    steps = A.parse_pattern("(chunk)-neg-cat-(mul){0,2}-add", "test")
    assert [(s.op, s.low, s.high) for s in steps] == [("chunk", 1, 1), ("neg", 1, 1), ("cat", 1, 1), ("mul", 0, 2), ("add", 1, 1)]


@pytest.mark.parametrize("bad", ["softmax-(mul{0,1}", "(pow){0,1}", "a--b"])
def test_an_unreadable_pattern_names_the_file(bad):
    with pytest.raises(A.AdvisorRuleError, match=re.escape("where.yaml")):
        A.parse_pattern(bad, "where.yaml")


def test_a_changed_file_is_refused_naming_it(tmp_path, monkeypatch):
    changed = tmp_path / A.RULE_FILE
    changed.write_bytes(A.rule_path().read_bytes() + b"\n# edited\n")
    monkeypatch.setattr(A, "rule_path", lambda: changed)
    A.load_rules.cache_clear()
    try:
        with pytest.raises(A.AdvisorRuleError, match=str(changed)):
            A.load_rules()
    finally:
        A.load_rules.cache_clear()
