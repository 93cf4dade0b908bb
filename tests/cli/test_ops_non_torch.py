"""`migrate ops NAME` for an API outside torch points at the rule that covers it, not "unknown API"."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from migrator.cli import main


def _ops(*args: str):
    return CliRunner().invoke(main, ["ops", *args], catch_exceptions=False)


@pytest.mark.parametrize(("name", "code", "use"), [
    ("flash_attn_varlen_func", "ATTN002", "npu_fusion_attention"),
    ("flash_attn.flash_attn_func", "ATTN001", "npu_fusion_attention"),
    ("apex.optimizers.FusedAdam", "APEX010", "AdamW"),
    ("FusedAdam", "APEX010", "AdamW"),
])
def test_a_covered_name_names_the_rule_its_replacement_and_where_to_read_more(name, code, use):
    result = _ops(name)
    assert result.exit_code == 0, result.stdout
    assert "unknown API" not in result.stdout
    assert f"covered by rule {code}" in result.stdout
    assert f"migrate rule {code}" in result.stdout and use in result.stdout


def test_json_carries_the_rule_record():
    result = _ops("flash_attn_varlen_func", "--format", "json")
    (row,) = json.loads(result.stdout)
    assert row["unknown_api"] is False
    (rule,) = row["rules"]
    assert rule["code"] == "ATTN002" and rule["name"] == "flash-attn-varlen-func"
    assert rule["symbol"] == "flash_attn.flash_attn_varlen_func" and rule["see"] == "migrate rule ATTN002"


def test_a_name_no_rule_covers_is_still_unknown():
    result = _ops("not_a_real_api_anywhere")
    assert result.exit_code == 1 and "unknown API" in result.stdout
