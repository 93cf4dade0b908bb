"""Terminal output: one line per finding (file:line:col), then a summary and the worst problems.

Every name and message passes through `migrator.ground.safe_text.one_line`: control bytes are shown, not
obeyed, and a newline in a file name or a recorded reason cannot start a forged finding line.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from migrator.engine.scanned_lines import SourceLines
    from migrator.ground.model import Finding

import click

from migrator.ground.model import FAMILIES, RunResult
from migrator.ground.safe_text import one_line
from migrator.reporters.site_progress import site_progress

SEVERITY_STYLE = {"error": "red", "warning": "yellow", "info": "cyan"}


def _style(text: str, color: bool, **kw: Any) -> str:
    return click.style(text, **kw) if color else text


def folded(f: Finding) -> bool:
    """Info-level notes without a fix (partial / unverified ops, cuDNN flags, ...) are summarised by
    rule, not listed one per line; they are no work (see migrator/reporters/effort.py)."""
    return f.severity == "info" and f.fix is None


def folded_line(result: RunResult) -> str | None:
    """`notes: 35 info-level findings not listed (OPS004 30, DEV015 5); ...`, or None."""
    counts: dict[str, int] = {}
    for f in result.findings:
        if folded(f):
            counts[f.code] = counts.get(f.code, 0) + 1
    if not counts:
        return None
    per_code = ", ".join(f"{code} {n}" for code, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))
    return (f"notes: {sum(counts.values())} info-level finding(s) not listed above ({per_code}); "
            "`--format json` or `migrate report` lists them")


def listed(result: RunResult, show_all: bool = False) -> int:
    """How many findings `render` prints one per line."""
    return sum(1 for f in result.findings if show_all or not folded(f))


def render(result: RunResult, color: bool = False, show_summary: bool = True, show_all: bool = False,
           lines_of: SourceLines | None = None) -> str:
    """`lines_of`: a `scanned_lines.SourceLines` to print the source line (and a caret) under each finding."""
    from migrator.reporters.routes import headlines, later_headlines, mark_text

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
        if lines_of is not None:
            out.extend(_source_excerpt(f, lines_of, color))
    for s in result.skipped:
        out.append(_style(one_line(f"{s.path}: skipped: {s.reason}"), color, dim=True))
    if not show_summary and not show_all and (line := folded_line(result)):
        out.append(_style(line, color, dim=True))
    if show_summary:
        if out:
            out.append("")
        if later := later_headlines(result):  # a framework only examples or tests use: after the findings
            out.extend([_style("Framework route (outside production code)", color, bold=True), *later, ""])
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
    left = site_progress(result.findings)  # the report's model; what fix already changed is in its record
    lines.append(f"  CUDA-dependent sites left: {left.remaining} ({left.fixable} fixable automatically, "
                 f"{left.manual} manual; `migrate report` adds the sites `migrate fix` fixed)")
    if s.coverage:
        ops = " · ".join(f"{k} {v}" for k, v in s.coverage.by_status.items())
        lines.append(f"  ops used on {s.coverage.soc}: {s.coverage.distinct_ops} distinct ({ops})")
    from migrator.reporters import effort

    acts = effort.actions(result.findings)
    optional = effort.optional_imports(result.findings)
    per_code: dict[str, list] = {}
    for a in acts:
        per_code.setdefault(a.code, []).append(a)
    biggest = sorted(per_code.items(), key=lambda kv: (-sum(a.minutes for a in kv[1]), kv[0]))[:3]
    parts = "; ".join(f"{code} {len(items)} × {effort.human(items[0].minutes)}" if len({a.minutes for a in items}) == 1
                      else f"{code} {len(items)} = {effort.human(sum(a.minutes for a in items))}" for code, items in biggest)
    scopes = effort.scope_line(result.findings)
    lines.append(f"  manual work: {len(acts)} action(s), about {effort.human(effort.total(result.findings))}"
                 + (f" [{scopes}]" if scopes else "")
                 + (f" — most: {parts}" if parts else "")
                 + " (minutes per rule: `migrate rule CODE`; the model: `migrate report`, `effort` in --format json)")
    if optional:
        libraries = sorted({f.imported.library for f in optional if f.imported})
        lines.append(f"  optional imports: {len(optional)} inside try/except ImportError with a fallback "
                     f"({', '.join(libraries)}): check the fallback runs on Ascend")
    if line := folded_line(result):
        lines.append(f"  {line}")
    if s.unattributed_markers:
        shown = len(s.unattributed)
        where = ("all listed in --format json" if shown >= s.unattributed_markers
                 else f"the first {shown} of {s.unattributed_markers} listed in --format json")
        lines.append(f"  unattributed markers: {s.unattributed_markers} CUDA-looking tokens no rule claimed ({where})")
    worst = result.worst(3)
    if worst:
        lines.append(_style("Worst first:", color, bold=True))
        for i, f in enumerate(worst, 1):
            cell = f"cell {f.cell}:" if f.cell is not None else ""
            lines.append(one_line(f"  {i}. {f.path}:{cell}{f.line}: {f.code} {f.message}"))
    return lines


def _source_excerpt(f: Finding, lines_of: SourceLines, color: bool) -> list[str]:
    """`  12 | x = y.cuda()` and a caret under the finding's columns (ruff's full output, one line)."""
    if f.cell is not None:
        return []  # a notebook's lines are per cell; its path:cell location already says where
    text = lines_of.line(f.path, f.line)
    if text is None:
        return []
    text = one_line(text.rstrip("\n").expandtabs(4))
    gutter = f"{f.line:>5} | "
    start = max(f.column - 1, 0)
    width = max((f.end_column or f.column) - f.column, 1) if (f.end_line or f.line) == f.line else max(len(text) - start, 1)
    caret = " " * (len(gutter) - 2) + "| " + " " * start + "^" * min(width, max(len(text) - start, 1))
    return [_style(gutter, color, dim=True) + text, _style(caret, color, fg=SEVERITY_STYLE[f.severity])]


def statistics(result: RunResult, color: bool = False) -> str:
    """One line per code, most frequent first: `count  CODE  [*]  name` (ruff's --statistics;
    `*` marks codes with an automatic fix at some site), then the total and how many findings fix would fix."""
    counts: dict[str, list] = {}
    for f in result.findings:
        row = counts.setdefault(f.code, [0, f.name, False])
        row[0] += 1
        row[2] = row[2] or f.fix is not None
    rows = sorted(counts.items(), key=lambda item: (-item[1][0], item[0]))
    width = max((len(str(n)) for _, (n, _, _) in rows), default=1)
    lines = [f"{n:>{width}}\t{_style(code, color, bold=True)}\t{'[*]' if fixable else '[ ]'} {name}"
             for code, (n, name, fixable) in rows]
    fixable = sum(1 for f in result.findings if f.fix is not None)
    noun = "finding" if len(result.findings) == 1 else "findings"
    lines.append(f"Found {len(result.findings)} {noun} ({fixable} fixable with `migrate fix`).")
    return "\n".join(lines) + "\n"
