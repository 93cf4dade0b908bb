"""The sourced error-code table (`ascend_env/error_codes.yaml`) and how `migrate explain` / `doctor --log` use it."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from migrator.doctor.explain import lookup, nearest_codes, scan_text
from migrator.doctor.where_to_look import code_key
from tests.conftest import run_cli

TABLE = Path(__file__).resolve().parents[2] / "ascend_env" / "error_codes.yaml"
ENTRIES = yaml.safe_load(TABLE.read_text(encoding="utf-8"))["entries"]


def test_the_table_holds_at_least_sixty_codes_each_once():
    codes = [str(entry["code"]).upper() for entry in ENTRIES]
    assert len(codes) >= 60
    assert len(set(codes)) == len(codes), sorted(c for c in codes if codes.count(c) > 1)


@pytest.mark.parametrize("entry", ENTRIES, ids=lambda e: str(e["code"]))
def test_every_entry_cites_a_public_page_and_says_cause_and_remedy(entry):
    assert isinstance(entry["code"], str), "quote numeric codes so YAML keeps them as text"
    assert re.match(r"https?://\S+", entry["source"]), entry["source"]
    for key in ("component", "title", "cause", "remedy"):
        assert isinstance(entry[key], str) and entry[key].strip(), key


@pytest.mark.parametrize("entry", ENTRIES, ids=lambda e: str(e["code"]))
def test_every_example_log_line_is_explained_by_its_entry(entry):
    if entry.get("match"):
        assert re.search(entry["match"], entry["example"]), "the match must hit the entry's own example"
    found = [finding.explanation.code for finding in scan_text(entry["example"])]
    assert entry["code"] in found


def test_an_acl_return_code_is_found_in_torch_npu_error_lines():
    line = ("RuntimeError: operator():build/CMakeFiles/torch_npu.dir/compiler_depend.ts:26 NPU function error: "
            "c10_npu::acl::AclrtSynchronizeStreamWithTimeout(copy_stream), error code is 507035")
    assert [e.code for e in lookup(line)] == ["507035"]
    assert [e.code for e in lookup("ACL stream synchronize failed, error code:507015")] == ["507015"]
    hex_device_code = "EZ9999: there is an aivec error exception, core id is 11, error code = 0x10"
    assert [e.code for e in lookup(hex_device_code)] == ["EZ9999"]
    assert lookup("NPU function error: aclnnFoo, error code is 561002") == []  # aclnn codes are not in the table


@pytest.mark.parametrize(("typed", "code"), [
    ("ez9999", "EZ9999"), ("  EI0006 ", "EI0006"), ("ez 9999", "EZ9999"), ("err 00100", "ERR00100"),
    ("507 015", "507015"), ("\t507015\n", "507015"), ("err02005", "ERR00005"), ("eh9999", "E*9999"),
])
def test_explain_accepts_case_and_whitespace_variants(typed, code):
    assert [e.code for e in lookup(typed)] == [code]


def test_code_key_leaves_text_that_is_no_code_alone_but_for_spacing():
    assert code_key("  two   accelerators ") == "two accelerators"
    assert code_key("e z 9 9 9 9") == "EZ9999"
    assert code_key("EZ99999") == "EZ99999"  # seven characters: no code shape, left as typed


def test_nearest_codes_share_the_longest_prefix():
    assert set(nearest_codes("EI0099")) <= {str(e["code"]) for e in ENTRIES if str(e["code"]).startswith("EI00")}
    assert "EI0006" in nearest_codes("EI0099")
    assert all(code.startswith("507") for code in nearest_codes("507999"))
    assert nearest_codes("hello") == []


@pytest.mark.parametrize(("code", "cause_words"), [
    ("507015", "AI Core kernel raised an exception"),
    ("ERR00100", "returned an error"),
    ("507053", "uncorrectable error"),
])
def test_migrate_explain_prints_cause_remedy_and_source(code, cause_words):
    done = run_cli("explain", code)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith(f"{code} (")
    assert cause_words in done.stdout
    assert [line.split(":")[0].strip() for line in lines[1:4]] == ["cause", "remedy", "source"]
    assert re.search(r"source: https?://", done.stdout)


def test_an_unknown_code_names_its_neighbours_and_where_to_look():
    done = run_cli("explain", " ei0099 ")
    assert done.returncode == 2
    assert "the nearest: EI0001" in done.stderr and "EI0006" in done.stderr
    assert "where to look: EI0099 has the shape of a HCCL" in done.stderr
    numeric = run_cli("explain", "561002")
    assert numeric.returncode == 2 and "5xxxxx an internal" in numeric.stderr and "aclError.md" in numeric.stderr
