"""Terminal output: one line per finding (file:line:col), then a summary and the worst problems.

Every name and message passes through `migrator.safe_text.one_line`: control bytes are shown, not
obeyed, and a newline in a file name or a recorded reason cannot start a forged finding line.
"""

from __future__ import annotations

import click

from migrator.model import FAMILIES, RunResult
from migrator.safe_text import one_line

SEVERITY_STYLE = {"error": "red", "warning": "yellow", "info": "cyan"}


def _style(text: str, color: bool, **kw) -> str:
    return click.style(text, **kw) if color else text


def folded(f) -> bool:
    """Info-level op-coverage notes (partial / unverified ops) are summarised, not listed one per line."""
    return f.family == "coverage" and f.severity == "info"


def render(result: RunResult, color: bool = False, show_summary: bool = True, show_all: bool = False) -> str:
    from migrator.reporters.routes import headlines, mark_text

    out: list[str] = []
    heads = headlines(result)
    if heads and show_summary:
        out.extend([_style("Framework route", color, bold=True), *heads, ""])
    for f in result.findings:
        if folded(f) and not show_all:
            continue
        where = _style(f"{one_line(f.location())}:", color, bold=True)  # notebooks: path:cell N:line:col
        code = _style(f.code, color, fg=SEVERITY_STYLE[f.severity], bold=True)
        fix = f" [fix: {f.fix.kind}]" if f.fix else ""
        out.append(f"{where} {code} {f.severity}: {one_line(f.message)}{fix}{one_line(mark_text(f))}")
    for s in result.skipped:
        out.append(_style(one_line(f"{s.path}: skipped: {s.reason}"), color, dim=True))
    if show_summary:
        if out:
            out.append("")
        out.extend(summary_lines(result, color))
    return "\n".join(out) + "\n"


def summary_lines(result: RunResult, color: bool = False) -> list[str]:
    s = result.summary
    lines = [_style("Summary", color, bold=True) + f" (root: {one_line(s.root)})"]
    sev = ", ".join(f"{k} {v}" for k, v in s.by_severity.items()) or "none"
    lines.append(
        f"  files scanned {s.files_scanned}, skipped {s.files_skipped}; "
        f"findings {s.findings} ({sev}); suppressed {s.suppressed}"
    )
    fams = " · ".join(f"{fam} {s.by_family.get(fam, 0)}" for fam in FAMILIES if s.by_family.get(fam))
    lines.append(f"  by family: {fams or 'none'}")
    if s.baselined is not None:
        lines.append(f"  baselined: {s.baselined} known finding(s) hidden by the baseline; {s.findings} new")
    fk = s.by_fix_kind
    lines.append(
        f"  auto-fixable: exact {fk['exact']} · numerics {fk['numerics']} (validate) · manual {fk['manual']}"
    )
    if s.coverage:
        counts = s.coverage.get("by_status", {})
        ops = " · ".join(f"{k} {v}" for k, v in counts.items())
        lines.append(f"  ops used on {s.coverage.get('soc')}: {s.coverage.get('distinct_ops', 0)} distinct ({ops})")
    notes = sum(1 for f in result.findings if folded(f))
    if notes:
        lines.append(
            f"  op notes: {notes} info-level coverage findings (partial / unverified ops) not listed above; "
            "`--format json` or `migrate report` lists them"
        )
    if s.unattributed_markers:
        lines.append(
            f"  unattributed markers: {s.unattributed_markers} CUDA-looking tokens no rule claimed "
            "(listed in --format json)"
        )
    worst = result.worst(3)
    if worst:
        lines.append(_style("Worst first:", color, bold=True))
        for i, f in enumerate(worst, 1):
            cell = f"cell {f.cell}:" if f.cell is not None else ""
            lines.append(one_line(f"  {i}. {f.path}:{cell}{f.line}: {f.code} {f.message}"))
    return lines
