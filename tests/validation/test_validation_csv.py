"""`migrate validate --csv FILE` / `--format csv` (issue 44 item 5): msprobe's compare result columns.

Read back with the csv module: msprobe's own header (the installed package's constant where msprobe is
importable, our pinned copy always), one row per compared tensor, the JSON result's figures in it.
"""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest

from migrator.reporters.validation_csv import MSPROBE_HEADER, MSPROBE_RESULT, check_text, render
from migrator.validation.dumps import DumpEvent
from migrator.validation.parent.comparison.compare import Check, TensorVerdict
from migrator.validation.parent.results import StageResult, ValidationResult
from migrator.validation.verdict import Verdict
from tests.conftest import run_cli

REPO = Path(__file__).resolve().parents[2]
# msprobe's tensor-mode compare header, written out here so a change of ours shows against a fixed list
PINNED_HEADER = (
    "NPU Name", "Bench Name", "NPU Dtype", "Bench Dtype", "NPU Tensor Shape", "Bench Tensor Shape",
    "NPU Requires_grad", "Bench Requires_grad", "Cosine", "EucDist", "MaxAbsErr", "MaxRelativeErr",
    "One Thousandth Err Ratio", "Five Thousandths Err Ratio", "NPU max", "NPU min", "NPU mean", "NPU l2norm",
    "Bench max", "Bench min", "Bench mean", "Bench l2norm", "Requires_grad Consistent", "Result", "Err_message",
)


def _read(text: str) -> tuple[list[str], list[dict[str, str]]]:
    reader = csv.DictReader(io.StringIO(text, newline=""))
    rows = list(reader)
    return list(reader.fieldnames or ()), rows


def test_header_is_msprobes_compare_header():
    header, rows = _read(render(ValidationResult(original="a", migrated="b", stages=())))
    assert tuple(header) == MSPROBE_HEADER == PINNED_HEADER and rows == []


def test_header_and_results_equal_the_installed_msprobe_constants():
    const = pytest.importorskip("msprobe.core.common.const", reason="mindstudio-probe not installed: only the "
                                "pinned header is checked (test_header_is_msprobes_compare_header)")
    compare = const.CompareConst
    assert MSPROBE_HEADER == tuple(compare.COMPARE_RESULT_HEADER)
    assert MSPROBE_RESULT == {Verdict.PASS: compare.PASS, Verdict.WARN: compare.WARNING, Verdict.FAIL: compare.ERROR}


def _event(name: str, dtype: str, shape: tuple[int, ...], norm: float) -> DumpEvent:
    return DumpEvent(name=name, match=name, kind="forward_output", module="m", cls="M", scope="m", shape=shape,
                     dtype=dtype, norm=norm)


def test_rows_carry_both_sides_our_verdict_and_defused_text():
    failing = TensorVerdict(
        name="Module.m.M.forward.0.output.0", match="m.forward.0.output.0", category="forward", scope="m",
        scope_cls="M", order=0, status=Verdict.FAIL, label="step0/",
        checks=(Check("rel_l2_fp32", 1e-7, 1e-4, Verdict.PASS), Check("ratio", 7.5, 2.0, Verdict.FAIL)),
        columns={"cosine": -0.25, "max_abs": 3.0, "max_rel": 1.5, "thousandth": 0.125, "rel_l2_vs_golden": 0.4},
        npu=_event("Module.m.M.forward.0.output.0", "torch.bfloat16", (2, 3), 4.5),
        bench=_event("Module.m.Orig.forward.0.output.0", "torch.float32", (2, 3), 4.0))
    original_only = TensorVerdict(
        name="=HYPERLINK(1)", match="x", category="forward", scope=None, scope_cls=None, order=1,
        status=Verdict.FAIL, label="", checks=(Check("unmatched", 1.0, 0.0, Verdict.FAIL),),
        bench=_event("=HYPERLINK(1)", "torch.float32", (4,), 1.0), note="only in the original run")
    stage = StageResult("S1", Verdict.FAIL, compared=(failing, original_only))
    header, rows = _read(render(ValidationResult(original="a", migrated="b", stages=(stage,))))
    first, second = rows
    assert (first["NPU Name"], first["Bench Name"]) == ("step0/Module.m.M.forward.0.output.0",
                                                       "step0/Module.m.Orig.forward.0.output.0")
    assert (first["NPU Dtype"], first["Bench Dtype"], first["NPU Tensor Shape"]) == ("torch.bfloat16", "torch.float32",
                                                                                     "[2, 3]")
    assert float(first["Cosine"]) == -0.25 and float(first["MaxAbsErr"]) == 3.0  # a negative number stays one
    assert float(first["One Thousandth Err Ratio"]) == 0.125 and float(first["NPU l2norm"]) == 4.5
    assert first["Result"] == "error" and first["Err_message"] == check_text("ratio", 7.5, 2.0, "fail")
    assert first["EucDist"] == first["NPU max"] == first["Requires_grad Consistent"] == ""  # not measured: empty
    assert second["NPU Name"] == "" and second["Bench Name"] == "'=HYPERLINK(1)"
    assert second["Err_message"].startswith("only in the original run; unmatched")


@pytest.mark.slow
def test_validate_csv_round_trips_against_the_json_result(migrated_gpt, gpt_reference, tmp_path):
    """A seeded bug (attention scale) so failing rows exist; the CSV and the JSON come from one run."""
    from mutations import MUTATIONS

    tree = next(m for m in MUTATIONS if m.name == "attn_scale").apply(migrated_gpt, tmp_path / "attn_scale")
    out, table = tmp_path / "result.json", tmp_path / "compare.csv"
    done = run_cli("validate", str(REPO / "samples" / "gpt"), "--migrated", str(tree), "--compare",
                   str(gpt_reference), "--stages", "S1", "-q", "-o", str(out), "--csv", str(table), "--format", "csv")
    assert done.returncode == 1, done.stderr[-2000:]
    text = table.read_text(encoding="utf-8")
    assert done.stdout == text  # --format csv prints what --csv writes
    header, rows = _read(text)
    assert tuple(header) == PINNED_HEADER
    (s1,) = [s for s in json.loads(out.read_text())["stages"] if s["id"] == "S1"]
    assert len(rows) == sum(sum(by_status.values()) for by_status in s1["counts"].values())
    failed = sum(by_status["fail"] for by_status in s1["counts"].values())
    assert sum(r["Result"] == "error" for r in rows) == failed > 0
    by_name = {r["NPU Name"]: r for r in rows if r["NPU Name"]}
    severity = {"pass": 0, "warning": 1, "error": 2}
    for worst in s1["worst"]:
        row = by_name[worst["tensor"]]
        assert severity[row["Result"]] >= Verdict(worst["status"]).severity
        if worst["status"] != "pass":
            assert check_text(worst["metric"], worst["value"], worst["threshold"], worst["status"]) in row["Err_message"]
        for column, key in (("Cosine", "cosine"), ("MaxAbsErr", "max_abs"), ("MaxRelativeErr", "max_rel"),
                            ("One Thousandth Err Ratio", "thousandth")):
            if key in worst.get("msprobe", {}):
                assert float(row[column]) == worst["msprobe"][key]
    assert all(r["Bench Name"] and r["NPU Dtype"] for r in rows if r["Result"] == "pass")


def test_csv_is_refused_for_two_msprobe_dumps(tmp_path):
    done = run_cli("validate", "--msprobe-target", str(tmp_path), "--msprobe-golden", str(tmp_path),
                   "--csv", str(tmp_path / "x.csv"))
    assert done.returncode == 2 and "msprobe compare" in done.stderr
    assert not (tmp_path / "x.csv").exists()
