"""Golden files, one per output format, rendered from a frozen scan of the fixture project.

Regenerate after an intended change (then read the diff before committing):

    UPDATE_GOLDEN=1 python3 -m pytest tests/report/test_golden.py

Normalised: the project folder is `/ROOT`, the tool version / catalogue / coverage table are fixed
in data/fixture-result.json, the date and git commit are fixed below. Rule documentation comes
from the live catalogue, so editing a rule's docs changes report.html / report.md / scan.sarif.json.
"""

from __future__ import annotations

import difflib
import json
from datetime import datetime, timezone
from pathlib import Path

import pytest

from migrator.engine.scanned_lines import SourceLines
from migrator.reporters import render, report_data
from migrator.reporters.baseline import with_findings
from migrator.reporters.report import render as render_report
from tests.report.conftest import GOLDEN, UPDATE

NOW = datetime(2024, 5, 17, 9, 30, tzinfo=timezone.utc)
GIT = {"repo": "demo", "commit": "0123456789abcdef0123456789abcdef01234567", "branch": "port", "dirty": False}

FIX_RECORD = {
    "schema_version": 1,
    "tool": {"name": "ascend-migrate", "version": "0.0.0-test"},
    "target": "npu",
    "root": "/somewhere/else",
    "files": [
        {
            "path": "train.py",
            "edits": [
                {"code": "DIST001", "fix_kind": "exact", "title": "Use `hccl`", "symbol": "nccl",
                 "original": {"line": 8, "column": 37, "end_line": 8, "end_column": 43},
                 "new": {"line": 9, "column": 37, "end_line": 9, "end_column": 43}},
                {"code": "AMP001", "fix_kind": "exact", "title": "Use `torch.amp.autocast(\"npu\")`", "symbol": "torch.cuda.amp.autocast",
                 "original": {"line": 20, "column": 10, "end_line": 20, "end_column": 33}, "new": {"line": 21, "column": 10, "end_line": 21, "end_column": 33},
                 "future_key": "ignored"},
            ],
        },
        {"path": "launch.sh", "edits": [{"code": "ENV001"}]},
    ],
}

VALIDATION = {
    "schema_version": 1,
    "stages": [
        {"id": "S0", "name": "plan check", "status": "pass", "worst": []},
        {"id": "S1", "name": "1-card parity", "status": "warn", "reason": "attention within 2x tolerance",
         "worst": [{"tensor": "layers.0.attn.out", "category": "forward", "metric": "max_rel", "value": 0.0031, "threshold": 0.002}]},
        {"id": "S2", "name": "data-parallel parity", "status": "fail", "reason": "gradients diverge",
         "first_divergence": "layers.3.mlp", "worst": [{"tensor": "layers.3.mlp.fc1.weight.grad", "category": "gradient", "metric": "cosine", "value": 0.91}],
         "bench": {"step_time_s": 0.412, "tokens_per_s": 19876, "mfu": 0.41}},
        {"id": "S3", "name": "tensor/expert-parallel parity", "status": "not_run", "reason": "world size 1", "worst": []},
    ],
    "markdown": "Notes with <script>alert(1)</script> and `code`.\n\n| a | b |\n|---|---|\n| 1 | 2 |\n",
}

LAUNCH_DIFF = """--- a/launch.sh
+++ b/launch.sh
@@ -1,4 +1,4 @@
 #!/bin/bash
-export CUDA_VISIBLE_DEVICES=0,1
+export ASCEND_RT_VISIBLE_DEVICES=0,1
 export NCCL_DEBUG=INFO
 python train.py "$@"
"""


def _normalise(text: str, root: Path) -> str:
    return text.replace(root.as_posix(), "/ROOT")


def check_golden(name: str, text: str) -> None:
    path = GOLDEN / name
    if UPDATE:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        return
    assert path.exists(), f"golden file {path} missing: run UPDATE_GOLDEN=1 python3 -m pytest tests/report"
    expected = path.read_text(encoding="utf-8")
    if text != expected:
        diff = "".join(list(difflib.unified_diff(expected.splitlines(True), text.splitlines(True), "golden", "now"))[:80])
        pytest.fail(f"{name} differs from its golden file (UPDATE_GOLDEN=1 to accept):\n{diff}")


@pytest.fixture
def fixed_git(monkeypatch):
    monkeypatch.setattr(report_data, "git_info", lambda root: dict(GIT))


@pytest.mark.parametrize("fmt,name", [("text", "scan.txt"), ("json", "scan.json"), ("sarif", "scan.sarif.json"), ("github", "scan.github.txt")])
def test_scan_formats(frozen_result, project, fmt, name):
    text = render(frozen_result, fmt, lines_of=SourceLines(project) if fmt == "sarif" else None)
    check_golden(name, _normalise(text, project))


@pytest.mark.parametrize("fmt", ["html", "md"])
def test_full_report(frozen_result, project, fixed_git, tmp_path, fmt):
    record = tmp_path / "record.json"
    record.write_text(json.dumps(FIX_RECORD))
    validation = tmp_path / "validation.json"
    validation.write_text(json.dumps(VALIDATION))
    data = report_data.gather(frozen_result, target="npu", soc="A2", fix_record=record, validation=validation,
                              diffs={"launch.sh": LAUNCH_DIFF}, now=NOW)
    text = _normalise(render_report(data, fmt), project).replace(str(tmp_path), "/TMP")
    check_golden(f"report.{fmt}", text)


@pytest.mark.parametrize("fmt", ["html", "md"])
def test_empty_report(frozen_result, project, fixed_git, fmt):
    empty = with_findings(frozen_result, [])
    data = report_data.gather(empty, now=NOW)
    check_golden(f"report-empty.{fmt}", _normalise(render_report(data, fmt), project))
