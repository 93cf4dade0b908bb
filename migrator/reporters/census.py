"""Text rendering of an op census (`migrate ops --trace`): findings first, then the worst verdicts."""

from __future__ import annotations

from migrator.census.model import Census, TracedOp

DEFAULT_ROWS = 40


def _where(op: TracedOp) -> str:
    site = op.first_user_site or (op.sites[0] if op.sites else None)
    if site is None:
        return "-"
    text = site.user.short() if site.user else "(harness)"
    if site.library is not None:
        text += f" -> {site.library.function} ({site.library.short()})"
    return text


def _row(op: TracedOp) -> tuple[str, ...]:
    verdict = op.verdict if op.verdict == op.status else f"{op.status}->{op.verdict}"
    if op.host_kernel:
        verdict = "cpu-backend"
    return (op.code or "", verdict, op.level, op.op, ",".join(dict.fromkeys(op.dtypes)) or "-",
            "/".join(p[:3] for p in op.phases), str(op.count), _where(op))


def render(census: Census, path: str | None = None, max_rows: int | None = DEFAULT_ROWS) -> str:
    s = census.summary()
    prog = census.program
    head = (f"op census of {prog.get('target')} ({prog.get('mode')}{', fake tensors' if prog.get('fake') else ''}, "
            f"{prog.get('stopped') or str(prog.get('steps')) + ' steps'}) on {census.soc}, "
            f"torch-npu {census.torch_npu_version} table; {census.seconds:.1f} s")
    lines = [head, f"  {s['distinct']['api']} torch APIs and {s['distinct']['aten']} ATen ops (distinct op+dtypes), "
             f"{s['calls']} calls; findings: "
             + (", ".join(f"{n} {k}" for k, n in s["findings"].items() if n) or "none")]
    ordered = census.worst_first()
    shown = ordered if max_rows is None else [o for o in ordered if o.code] + [o for o in ordered if not o.code]
    if max_rows is not None:
        shown = shown[:max(max_rows, len(census.findings))]
    rows = [("code", "verdict", "level", "op", "dtypes", "phase", "calls", "where")] + [_row(o) for o in shown]
    widths = [min(max(len(r[i]) for r in rows), 48) for i in range(len(rows[0]) - 1)]
    lines.append("")
    for r in rows:
        lines.append("  ".join((c if len(c) <= w else c[:w - 1] + "…").ljust(w) for c, w in zip(r[:-1], widths))
                     + "  " + r[-1])
    if len(shown) < len(ordered):
        lines.append(f"  … {len(ordered) - len(shown)} more ops" + (f" in {path}" if path else ""))
    for op in census.findings:
        lines.append(f"{op.code} {op.severity}: {op.message}")
    for site in census.fusions:  # advice: a fused torch_npu op for eager ops (advisor rule on the traced flow, AST)
        lines.append(f"fusion ({site.found_by}) {site.path}:{site.line}: {site.fused_api}"
                     + (f" [{'-'.join(site.ops)}]" if site.ops else "") + f"; {site.detail}"
                     + (f"; rule {site.rule}" if site.rule else ""))
    if census.perf:
        from migrator.catalogue.loader import load_catalogue

        catalogue = load_catalogue()
        for perf in census.perf:
            rule = catalogue.impl_rule(perf.impl)
            code, severity = (rule.code, rule.severity) if rule else ("PERF", "warning")
            lines.append(f"{code} {severity}: {perf.path}:{perf.line} ({perf.function}): {perf.message}")
    for note in census.notes:
        lines.append(f"note: {note}")
    if path:
        lines.append(f"census written to {path}")
    return "\n".join(lines) + "\n"


def annotate_ops(rows: list[dict] | None, census: Census | None) -> tuple[list[dict] | None, dict | None]:
    """For the report's op-coverage section: mark each static op row `traced` (the dtypes it ran
    with, its first user line) or `static`, and summarise the census. Unchanged without a census."""
    if census is None:
        return rows, None
    by_name: dict[str, list[TracedOp]] = {}
    for op in census.ops:
        if op.level == "api":
            by_name.setdefault(op.op, []).append(op)
    out = []
    for row in rows or []:
        seen = by_name.get(row["name"], [])
        site = next((o.first_user_site for o in seen if o.first_user_site is not None), None)
        out.append({**row, "fact": "traced" if seen else "static",
                    "traced_dtypes": ", ".join(sorted({d for o in seen for d in o.dtypes})),
                    "traced_site": site.user.short() if site and site.user else ""})
    summary = census.summary()
    info = {"target": census.program.get("target"), "mode": census.program.get("mode"),
            "fake": bool(census.program.get("fake")), "soc": census.soc,
            "api": summary["distinct"]["api"], "aten": summary["distinct"]["aten"],
            "traced_rows": sum(1 for r in out if r["fact"] == "traced"),
            "findings": [{"code": o.code, "severity": o.severity, "level": o.level, "op": o.op,
                          "dtypes": ", ".join(o.dtypes), "message": o.message} for o in census.findings]}
    return (out if rows is not None else None), info
