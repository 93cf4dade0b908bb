"""`migrate validate --csv FILE` / `--format csv`: every compared tensor in msprobe's compare result layout.

So a validation opens in the spreadsheets made for `msprobe compare` output: msprobe's tensor-mode header,
one row per tensor a stage compared (forward inputs and outputs, the loss, backward grads, parameter
grads, optimizer updates, training updates), stage after stage, in each run's order. "NPU" is the migrated
run, "Bench" the original run the report columns compare against (its bf16-policy run R, else the fp32
golden G). Our verdict goes in `Result` as msprobe writes it (pass / warning / error), the checks that did
not pass (or why a tensor has no counterpart) in `Err_message`. Columns we do not measure (EucDist, the
five-thousandths ratio, max / min / mean, requires_grad) stay empty.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from migrator.reporters.csv_table import table
from migrator.validation.verdict import Verdict

if TYPE_CHECKING:
    from migrator.validation.dumps import DumpEvent
    from migrator.validation.parent.comparison.compare import TensorVerdict
    from migrator.validation.parent.results import ValidationResult

# msprobe's tensor-mode header: `CompareConst.COMPARE_RESULT_HEADER` of mindstudio-probe 26.2.0
# (msprobe/core/common/const.py: BASIC_INFO + ALL_COMPARE_INDEX with the default algorithms + SUMMARY_INFO +
# EXTRACT_INDEX). Pinned: msprobe is optional and heavy; tests/validation/test_validation_csv.py compares it
# with the installed package's constant.
MSPROBE_HEADER = (
    "NPU Name", "Bench Name", "NPU Dtype", "Bench Dtype", "NPU Tensor Shape", "Bench Tensor Shape",
    "NPU Requires_grad", "Bench Requires_grad",
    "Cosine", "EucDist", "MaxAbsErr", "MaxRelativeErr", "One Thousandth Err Ratio", "Five Thousandths Err Ratio",
    "NPU max", "NPU min", "NPU mean", "NPU l2norm", "Bench max", "Bench min", "Bench mean", "Bench l2norm",
    "Requires_grad Consistent", "Result", "Err_message",
)
# msprobe's result values (CompareConst.PASS / WARNING / ERROR, the ResultLevel of its indicator analysis)
MSPROBE_RESULT = {Verdict.PASS: "pass", Verdict.WARN: "warning", Verdict.FAIL: "error"}
# our report columns (metrics.report_columns) under msprobe's names
REPORT_COLUMNS = {"Cosine": "cosine", "MaxAbsErr": "max_abs", "MaxRelativeErr": "max_rel",
                  "One Thousandth Err Ratio": "thousandth"}


def check_text(metric: str, value: float, threshold: float, status: str) -> str:
    """One check that did not pass, as `Err_message` lists it."""
    return f"{metric} {value:.6g} (threshold {threshold:.6g}, {status})"


def _shape(event: DumpEvent | None) -> str | None:
    return str(list(event.shape)) if event is not None and event.shape is not None else None


def msprobe_row(v: TensorVerdict) -> dict[str, object]:
    """The cells of one compared tensor, by msprobe column; a column left out is empty."""
    npu, bench = v.npu, v.bench
    problems = [check_text(c.metric, c.value, c.threshold, c.status) for c in v.checks if c.status != Verdict.PASS]
    if npu is not None:
        npu_name = f"{v.label}{npu.name}"
    else:  # only the original run has it (no NPU name), or the verdict is on no one tensor (the dtype policy)
        npu_name = "" if bench is not None else f"{v.label}{v.name}"
    row: dict[str, object] = {
        "NPU Name": npu_name,
        "Bench Name": f"{v.label}{bench.name}" if bench is not None else "",
        "NPU Dtype": npu.dtype if npu is not None else None, "Bench Dtype": bench.dtype if bench is not None else None,
        "NPU Tensor Shape": _shape(npu), "Bench Tensor Shape": _shape(bench),
        "NPU l2norm": npu.norm if npu is not None else None, "Bench l2norm": bench.norm if bench is not None else None,
        "Result": MSPROBE_RESULT.get(v.status, str(v.status)),
        "Err_message": "; ".join(([v.note] if v.note else []) + problems),
    }
    row.update({ours: v.columns[key] for ours, key in REPORT_COLUMNS.items() if v.columns.get(key) is not None})
    return row


def compared_rows(result: ValidationResult) -> Iterable[dict[str, object]]:
    for stage in result.stages:
        for verdict in stage.compared:
            yield msprobe_row(verdict)


def render(result: ValidationResult) -> str:
    """The CSV text: msprobe's header, then a row per compared tensor (a header only when none was)."""
    return table(MSPROBE_HEADER, ([row.get(column) for column in MSPROBE_HEADER] for row in compared_rows(result)))
