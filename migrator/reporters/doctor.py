"""Text and JSON renderings of `migrate doctor` and `migrate explain` results."""

from __future__ import annotations

import json
from dataclasses import asdict

from migrator.doctor.model import DoctorReport, Explanation, Status

_MARK = {Status.OK: "ok     ", Status.INFO: "info   ", Status.WARN: "warn   ", Status.PROBLEM: "PROBLEM"}


def doctor_text(report: DoctorReport) -> str:
    lines = ["ascend environment" + ("" if report.npu_present else ": no NPU on this machine")]
    for check in report.checks:
        line = f"  {_MARK[check.status]} {check.name}: {check.found}"
        if check.detail:
            line += f" ({check.detail})"
        lines.append(line)
        if check.fix and check.status.needs_fix:
            lines.append(f"          fix: {check.fix}")
        elif check.fix and check.status is Status.INFO:
            lines.append(f"          hint: {check.fix}")
    for finding in report.log_findings:
        lines.append(f"  log line {finding.line_number}: {finding.explanation.code} {finding.explanation.title}")
        lines.append(f"          cause: {finding.explanation.cause}")
        lines.append(f"          fix: {finding.explanation.remedy}")
        lines.append(f"          source: {finding.explanation.source}")
    problems = len(report.problems) + len(report.log_findings)
    lines.append(f"{problems} problem(s)" if problems else "no problems found")
    return "\n".join(lines) + "\n"


def doctor_json(report: DoctorReport) -> str:
    data = {
        "npu_present": report.npu_present,
        "devices": [asdict(d) for d in report.devices],
        "checks": [asdict(c) for c in report.checks],
        "log_findings": [{"line_number": f.line_number, "line": f.line, **asdict(f.explanation)}
                         for f in report.log_findings],
        "problems": len(report.problems) + len(report.log_findings),
    }
    return json.dumps(data, indent=2, ensure_ascii=False) + "\n"


def explanation_text(explanation: Explanation) -> str:
    return (f"{explanation.code} ({explanation.component}): {explanation.title}\n"
            f"  cause:  {explanation.cause}\n"
            f"  remedy: {explanation.remedy}\n"
            f"  source: {explanation.source}\n")


def explanations_json(explanations: list[Explanation]) -> str:
    return json.dumps([asdict(e) for e in explanations], indent=2, ensure_ascii=False) + "\n"
