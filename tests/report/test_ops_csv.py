"""Op coverage as CSV (issue 44 item 5): `scan --format csv-ops`, `ops --format csv`, `ops --trace --format csv`.

Each CSV is read back with the csv module and compared with the JSON the same command gives.
"""

from __future__ import annotations

import csv
import io
import json

from migrator.reporters.ops_csv import OPS_COLUMNS, SITE_SEPARATOR
from tests.conftest import run_cli


def _rows(text: str) -> list[dict[str, str]]:
    reader = csv.DictReader(io.StringIO(text, newline=""))
    assert tuple(reader.fieldnames or ()) == OPS_COLUMNS
    return list(reader)


def _split(cell: str) -> list[str]:
    return cell.split(SITE_SEPARATOR) if cell else []


def test_scan_csv_ops_has_one_row_per_op_the_json_lists(project):
    as_json = run_cli("scan", str(project), "--format", "json", "--no-cache")
    as_csv = run_cli("scan", str(project), "--format", "csv-ops", "--no-cache")
    assert as_csv.returncode == as_json.returncode, as_csv.stderr
    coverage = json.loads(as_json.stdout)["summary"]["coverage"]
    rows = _rows(as_csv.stdout)
    assert [r["op"] for r in rows] == [op["name"] for op in coverage["ops"]] and rows
    for row, op in zip(rows, coverage["ops"]):
        assert row["status"] == op["status"] and row["soc"] == coverage["soc"]
        assert row["coverage_table"] == f"torch-npu {coverage['torch_npu_version']}"
        assert _split(row["dtypes"]) == op["dtypes"] and row["npu_name"] == (op["npu_name"] or "")
        assert row["runs_as"] == op["runs_as"] and row["notes"] == op["why"]
        assert int(row["uses"]) == op["count"] and _split(row["sites"]) == op["sites"]
    looked_up = json.loads(run_cli("ops", rows[0]["op"], "--format", "json").stdout)[0]
    assert rows[0]["source"] == looked_up["source"] != ""


def test_ops_csv_matches_the_lookups_and_defuses_formula_names():
    names = ("F.gelu", "torch.matmul", "=HYPERLINK(1)", "flash_attn_varlen_func")
    as_json = run_cli("ops", *names, "--format", "json")
    as_csv = run_cli("ops", *names, "--format", "csv")
    assert as_csv.returncode == as_json.returncode == 1  # the made-up name is an unknown API
    rows = _rows(as_csv.stdout)
    answers = json.loads(as_json.stdout)
    assert len(rows) == len(answers) == len(names)
    for row, answer in zip(rows, answers):
        assert row["status"] == answer["status"] and row["source"] == answer["source"]
        assert _split(row["dtypes"]) == answer["dtypes"]
        assert row["coverage_table"] == f"torch-npu {answer['version']}"
    gelu, matmul, formula, flash = rows
    assert (gelu["op"], gelu["asked_as"]) == ("torch.nn.functional.gelu", "F.gelu") and matmul["asked_as"] == ""
    assert "partial: argument limits" in gelu["notes"] and gelu["runs_as"].startswith("aten::gelu")
    assert formula["op"] == "'=HYPERLINK(1)" and "unknown API" in formula["notes"]
    assert "covered by rule ATTN" in flash["notes"]


def test_ops_list_csv_has_every_entry_of_the_status():
    as_csv = _rows(run_cli("ops", "--list", "--status", "cpu_fallback", "--format", "csv").stdout)
    as_json = json.loads(run_cli("ops", "--list", "--status", "cpu_fallback", "--format", "json").stdout)
    assert [r["op"] for r in as_csv] == [e["name"] for e in as_json] and as_csv
    assert {r["status"] for r in as_csv} == {"cpu_fallback"}


def test_census_csv_row_per_traced_op_with_the_users_lines():
    from migrator.census.model import Census
    from migrator.reporters.ops_csv import render_census

    frame = {"path": "train.py", "line": 12, "function": "main"}
    op = {"level": "api", "op": "torch.nn.functional.silu", "dtypes": ["fp64"], "count": 3, "status": "supported",
          "verdict": "partial", "kernel": "npu_kernel", "documented_dtypes": ["bf16", "fp16", "fp32"], "known": True,
          "note": "fp64 is outside the documented dtypes", "code": "OPS003", "severity": "warning",
          "message": "-fp64 input", "sites": [{"phase": "forward", "count": 2, "user_frame": frame},
                                               {"phase": "backward", "count": 1, "user_frame": frame}]}
    census = Census.from_json({"program": {}, "soc": "A3", "torch_npu_version": "2.14.0", "ops": [op]})
    (row,) = _rows(render_census(census))
    assert (row["op"], row["status"], row["soc"], row["coverage_table"]) == (
        "torch.nn.functional.silu", "partial", "A3", "torch-npu 2.14.0")
    assert _split(row["dtypes"]) == ["bf16", "fp16", "fp32"] and _split(row["dtypes_used"]) == ["fp64"]
    assert row["uses"] == "3" and row["sites"] == "train.py:12"  # one line, listed once
    assert row["notes"].startswith("'-fp64 input")  # a message starting with "-" is not a formula
