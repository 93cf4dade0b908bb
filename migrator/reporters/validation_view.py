"""The validation section of the reviewer report, as plain data both templates render the same way.

Built from the structured stages of a validation result (validation.schema.json), never from its
embedded Markdown, so the HTML page has real tables (no literal `<details>` or `<br>`) and the
Markdown comment says the same thing: the verdict and each stage's status (for the summary cards),
then per stage its checks and worst tensors, failing ones first, with metric, value, threshold and
msprobe's report-only metrics. A result written by another tool keeps its free-form Markdown.
"""

from __future__ import annotations

import re
from typing import Any

from migrator.ground.report_documents import Row, ValidationDocument
from migrator.validation.verdict import Verdict

VERDICT_ORDER = (Verdict.FAIL, Verdict.ERROR, Verdict.WARN, Verdict.PASS)  # the worst run stage decides; not_run never does
STATUS_RANK = {Verdict.ERROR: 0, Verdict.FAIL: 1, Verdict.WARN: 2, Verdict.PASS: 3, Verdict.NOT_RUN: 4}
MAX_TENSORS = 8  # worst tensors shown per stage; the rest sit in a collapsed list
MSPROBE = (("cosine", "cosine"), ("max_abs", "max abs"), ("max_rel", "max rel"), ("thousandth", "1‰ err ratio"))
HIGHER_IS_BETTER = ("cosine",)


def number(value: Any) -> str:
    """Figures as a reviewer reads them: 3 significant digits, huge values (a NaN or inf stand-in) as inf."""
    if value is None or value == "":
        return ""
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, float):
        if abs(value) >= 1e300:
            return "inf" if value > 0 else "-inf"
        if value == int(value) and abs(value) < 1e6:
            return str(int(value))
        return f"{value:.3g}"
    return str(value)


def _tensor_status(row: Row) -> str:
    if isinstance(row.get("status"), str):
        return row["status"]
    value, threshold = row.get("value"), row.get("threshold")
    if not isinstance(value, (int, float)) or not isinstance(threshold, (int, float)):
        return ""
    ok = value >= threshold if row.get("metric") in HIGHER_IS_BETTER else value <= threshold
    return Verdict.PASS if ok else Verdict.FAIL


def _tensor(row: Row) -> dict[str, Any]:
    status = _tensor_status(row)
    msprobe: dict[str, Any] = row["msprobe"] if isinstance(row.get("msprobe"), dict) else {}
    return {
        "tensor": str(row.get("tensor", "?")),
        "module": str(row.get("module") or ""),
        "category": str(row.get("category", "")),
        "metric": str(row.get("metric", "")),
        "value": number(row.get("value")),
        "threshold": number(row.get("threshold")),
        "status": status,
        "msprobe": [number(msprobe.get(key)) for key, _ in MSPROBE],
    }


def _check(row: Row) -> dict[str, Any]:
    return {
        "check": str(row.get("check", "?")),
        "status": str(row.get("status", "")),
        "metric": str(row.get("metric") or ""),
        "worst": number(row.get("worst")),
        "threshold": number(row.get("threshold")),
        "tensors": row.get("tensors") if isinstance(row.get("tensors"), int) else None,
        "where": str(row.get("worst_tensor") or ""),
        "message": str(row.get("message") or ""),
    }


def _by_status(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Failing first, then warnings, then the rest; each group in the order the result gave (worst first)."""
    return sorted(rows, key=lambda r: STATUS_RANK.get(r["status"], 5))


def _counts(counts: Any) -> str:
    """`forward 136 pass · backward 50 pass, 4 fail`: tensors per category and verdict."""
    if not isinstance(counts, dict):
        return ""
    parts = []
    for category, verdicts in counts.items():
        if not isinstance(verdicts, dict):
            continue
        shown = [f"{n} {v}" for v, n in verdicts.items() if isinstance(n, int) and n]
        if shown:
            parts.append(f"{category} {', '.join(shown)}")
    return " · ".join(parts)


def _bench_pairs(bench: Any) -> list[tuple[str, str]]:
    if not isinstance(bench, dict):
        return []
    return [(str(k), number(v) if isinstance(v, (int, float, str)) else str(v)) for k, v in bench.items() if k != "perf"]


def _perf(perf: Any) -> dict | None:
    """The stage benchmark table (migrate validate --bench): original | migrated | ratio. The result may
    come from another tool: read leniently (a figure of the wrong kind shows as "-")."""
    if not isinstance(perf, dict) or perf.get("skipped"):
        return None
    from migrator.validation.parent.perf.benchreport import perf_caption, perf_rows
    from migrator.validation.parent.perf.records import StagePerf

    read = StagePerf.read(perf)
    return {"caption": perf_caption(read), "rows": perf_rows(read)}


def _scaling(lines: Any) -> str:
    if not isinstance(lines, list) or not lines:
        return ""
    from migrator.validation.parent.perf.benchreport import scaling_text
    from migrator.validation.parent.perf.records import ScalingRow

    return scaling_text(ScalingRow.read_rows(lines))


def _stage(st: Row) -> dict[str, Any]:
    bench = st.get("bench")
    tensors = _by_status([_tensor(w) for w in st.get("worst", []) if isinstance(w, dict)])
    checks = _by_status([_check(c) for c in st.get("checks", []) if isinstance(c, dict)])
    failing = [c for c in checks if c["status"] in (Verdict.FAIL, Verdict.ERROR, Verdict.WARN)]
    reason = str(st.get("reason") or "")
    summary = str(st.get("summary") or "") or reason
    return {
        "id": str(st["id"]),
        "anchor": f"stage-{str(st['id']).lower()}",
        "name": str(st["name"]),
        "status": str(st["status"]),
        "summary": summary,
        "reason": reason if reason and reason != summary else "",
        "first_divergence": str(st.get("first_divergence") or ""),
        "checks": checks,
        "failing_checks": len(failing),
        "tensors": tensors[:MAX_TENSORS],
        "more_tensors": tensors[MAX_TENSORS:],
        "has_msprobe": any(any(t["msprobe"]) for t in tensors),
        "counts": _counts(st.get("counts")),
        "notes": [str(n) for n in st.get("notes", []) if n] if isinstance(st.get("notes"), list) else [],
        "bench": _bench_pairs(bench),
        "perf": _perf(bench.get("perf") if isinstance(bench, dict) else None),
    }


def _layers(layers: Row) -> list[str]:
    out = []
    for side in ("original", "migrated"):
        used = layers.get(side)
        if isinstance(used, dict) and used:
            out.append(f"{side} side: " + "; ".join(f"{k}: {v}" for k, v in used.items()))
        elif side in layers:
            out.append(f"{side} side: the real packages and device (no reference layer)")
    return out


def plain_markdown(text: str) -> str:
    """The few HTML tags Markdown summaries use on GitHub, as Markdown (the report shows raw HTML as
    text): `<br>` in a table cell becomes "; ", `<summary>X</summary>` a bold line, `<details>` goes."""
    text = re.sub(r"<br\s*/?>", "; ", text, flags=re.I)
    text = re.sub(r"^[ \t]*<details(?:[ \t]+open)?>[ \t]*(?:<summary>(.*?)</summary>)?[ \t]*$",
                  lambda m: f"**{m.group(1)}**" if m.group(1) else "", text, flags=re.I | re.M)
    return re.sub(r"^[ \t]*</details>[ \t]*$", "", text, flags=re.I | re.M)


def build(doc: ValidationDocument | None) -> dict[str, Any] | None:
    """The section's data: verdict, stages (summary-card chips and detail blocks), layers, notes."""
    if doc is None:
        return None
    stages = [_stage(st) for st in doc.stages]
    statuses = [s["status"] for s in stages]
    verdict = next((s for s in VERDICT_ORDER if s in statuses), Verdict.NOT_RUN)
    markdown = doc.markdown
    return {
        "verdict": verdict,
        "overall": verdict,
        "stages": stages,
        "ran": [s for s in stages if s["status"] != Verdict.NOT_RUN],
        "original": doc.text("original"),
        "migrated": doc.text("migrated"),
        "exit_code": doc.exit_code,
        "layers": _layers(doc.layers),
        "notes": list(doc.notes),
        "markdown": plain_markdown(markdown) if markdown is not None and not doc.written_by_migrate else "",
        "scaling": _scaling(doc.scaling),
        "msprobe_names": [label for _, label in MSPROBE],
    }
