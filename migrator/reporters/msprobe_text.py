"""Text and JSON of `migrate validate --msprobe-target/--msprobe-golden` (a `MsprobeComparison`)."""

from __future__ import annotations

import json
from dataclasses import asdict

from migrator.validation.parent.interop.msprobe_compare import MsprobeComparison
from migrator.validation.verdict import Verdict


def _first_divergence(result: MsprobeComparison) -> list[str]:
    first = result.first_divergence
    if first is None:
        return []
    lines = [f"first divergence: {first.key} ({first.label})" + (f" in {first.scope}" if first.scope else "")]
    if first.user_line:
        lines.append(f"  at {first.user_line}")
    for diff in first.argument_diffs:
        lines.append(f"  argument {diff}")
    for slot, parameter in first.parameters:
        lines.append(f"  {slot} is the parameter {parameter}")
    if result.one_sided_before:
        lines.append(f"  right after records only the target has: {', '.join(result.one_sided_before)}")
    if result.lost_collectives:
        lines.append(f"  where the original called: {', '.join(result.lost_collectives)}")
    if result.unrecorded:
        lines.append(f"  {result.unrecorded}")
    lines += [f"  {text}" for text in result.in_source]
    if result.built_differently:
        lines.append(f"  parameters that differ as built: {'; '.join(result.built_differently)}")
    if (worst := first.worst) is not None:
        lines.append(f"  {worst.slot}: {worst.metric} {worst.value:.3g} > {worst.threshold:g}"
                     + (f" ({worst.detail})" if worst.detail else ""))
    return lines


def comparison_text(result: MsprobeComparison, verbose: bool = False) -> str:
    counts: dict[str, int] = {}
    for record in result.records:
        counts[record.status] = counts.get(record.status, 0) + 1
    lines = [f"msprobe dumps ({result.task}): {result.status} — "
             + ", ".join(f"{n} {status}" for status, n in sorted(counts.items()))]
    lines += _first_divergence(result)
    shown = [r for r in result.records if verbose or r.status != Verdict.PASS]
    for record in shown[: None if verbose else 12]:
        bad = [s for s in record.slots if verbose or s.status != Verdict.PASS]
        cells = ", ".join(f"{s.slot} {s.metric} {s.value:.3g} {s.status}" for s in bad)
        lines.append(f"  {record.status:<4} {record.label} {record.key}: {cells}")
    for item in result.unmatched[:20]:
        lines.append(f"  unmatched {item}")
    lines += [f"note: {n}" for n in result.notes]
    return "\n".join(lines) + "\n"


def comparison_json(result: MsprobeComparison) -> str:
    doc = asdict(result)
    doc["exit_code"] = result.exit_code
    return json.dumps(doc, indent=1, default=str) + "\n"
