"""Text and JSON of `migrate advise --profile DIR` (a finished `AdviseResult`)."""

from __future__ import annotations

import json
from dataclasses import asdict

from migrator.census.advise.model import CONFIRMED, NOT_CHECKABLE, NOT_SEEN, AdviseResult

MARK = {CONFIRMED: "confirmed", NOT_SEEN: "not seen", NOT_CHECKABLE: "not checkable"}


def render_text(result: AdviseResult) -> str:
    profile = result.profile
    counts = dict(result.counts())
    lines = [f"profile: {profile.output_dir} ({', '.join(profile.files) or 'no documented file'})",
             f"  {len(profile.kernels)} kernels ({len(profile.aicpu_kernels)} on the AI_CPU), "
             f"{profile.sync_calls} stream synchronizations, {len(profile.steps)} steps",
             f"checked {len(result.checks)} pre-hardware finding(s)"
             + (" (scan and op census)" if result.census else " (scan; no op census at the root)") + ": "
             + ", ".join(f"{counts[s]} {MARK[s]}" for s in (CONFIRMED, NOT_SEEN, NOT_CHECKABLE)), ""]
    for status in (CONFIRMED, NOT_SEEN, NOT_CHECKABLE):
        for check in (c for c in result.checks if c.status == status):
            lines.append(f"{check.path}:{check.line}: {check.code} {MARK[status]}: {check.evidence}")
    advisor = result.advisor
    lines.append("")
    if not advisor.installed:
        lines.append(f"msprof-analyze is not installed: `{' '.join(advisor.command)}` not run "
                     "(pip install msprof-analyze for Huawei's advisor on this profile)")
    else:
        state = "could not finish" if advisor.exit_code is None else f"exit {advisor.exit_code}"
        lines.append(f"`{' '.join(advisor.command)}` ({state}):")
        lines.extend("  " + line for line in advisor.output.splitlines())
    lines.extend(f"note: {note}" for note in result.notes)
    return "\n".join(lines) + "\n"


def render_json(result: AdviseResult) -> str:
    data = asdict(result)
    data["profile"] = {k: v for k, v in data["profile"].items() if k != "kernels"}
    data["profile"]["kernel_count"] = len(result.profile.kernels)
    data["profile"]["aicpu_kernel_count"] = len(result.profile.aicpu_kernels)
    data["counts"] = dict(result.counts())
    return json.dumps(data, indent=2, ensure_ascii=False) + "\n"
