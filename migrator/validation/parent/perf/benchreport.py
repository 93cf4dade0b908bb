"""Text renderings of the stage benchmarks (``perf`` in a stage's ``bench``), shared by the
terminal output, the Markdown summary and ``migrate report --validation``. No torch here."""

from __future__ import annotations

from collections.abc import Sequence

from .records import RepeatFailure, ScalingRow, SideFigures, SidePerf, StagePerf, StepTime

KINDS = ("all-reduce", "all-gather", "reduce-scatter", "all-to-all")
NOT_BENCHMARKED = SidePerf()


def _si(v: float | None) -> str:
    if v is None:
        return "-"
    for div, unit in ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(v) >= div:
            return f"{v / div:.3g}{unit}"
    return f"{v:.3g}"


def _time(st: StepTime | None) -> str:
    if st is None:
        return "-"
    med, iqr = st.median_s, st.iqr_s if st.iqr_s is not None else 0.0
    if med is None:
        return "-"
    scale, unit = (1e3, "ms") if med < 1 else (1.0, "s")
    return f"{med * scale:.3g} {unit} (IQR {iqr * scale:.2g}, n={st.n})"


def _tflops(v: float | None) -> str:
    if v is None:
        return "-"
    return f"{v:.3g}" if v >= 0.01 else f"{v:.2e}"


def _mfu(side: SideFigures) -> str:
    if side.mfu is not None:
        return f"{side.mfu * 100:.3g} %"
    return side.mfu_note or "n/a: unknown peak"


def _comm(side: SideFigures) -> str:
    comm = side.comm_share
    total = comm.get("total")
    if total is None:
        return "-"
    parts = [f"{k} {share * 100:.2g} %" for k in KINDS if (share := comm.get(k))]
    return f"{total * 100:.3g} %" + (f" ({', '.join(parts)})" if parts else "")


def _mem(side: SideFigures) -> str:
    b = side.peak_memory_bytes
    if b is None:
        return "-"
    kind = side.peak_memory_kind or ""
    return f"{b / 2 ** 20:.4g} MiB" + (" (host RSS)" if "RSS" in kind else "")


def _failure(f: RepeatFailure) -> str:
    return f"#{f.repeat} {f.kind}: {f.reason[:120]}"


def _crash(side: SidePerf) -> str:
    if side.repeats is None:
        return "-"
    failed = side.repeats - (side.ok_repeats or 0)
    text = f"{(side.crash_rate or 0) * 100:.3g} % ({failed}/{side.repeats})"
    if side.failures:
        text += ": " + "; ".join(_failure(f) for f in side.failures[:3])
    return text


def _ratio(v: float | None) -> str:
    return "-" if v is None else f"{v:.3g}x"


def perf_rows(perf: StagePerf) -> list[tuple[str, str, str, str]]:
    """(metric, original, migrated, migrated/original) rows of one stage's benchmark."""
    so, sm = perf.original or NOT_BENCHMARKED, perf.migrated or NOT_BENCHMARKED
    o, m, r = so.measured, sm.measured, perf.ratio
    rows = [
        ("step time (median)", _time(o.step_time), _time(m.step_time), _ratio(r.get("step_time_median_s"))),
        ("samples/s", _si(o.samples_per_s), _si(m.samples_per_s), _ratio(r.get("samples_per_s"))),
        ("tokens/s", _si(o.tokens_per_s), _si(m.tokens_per_s), _ratio(r.get("tokens_per_s"))),
        ("model FLOPs/step (fwd+bwd)", _si(o.flops_per_step), _si(m.flops_per_step), ""),
        ("achieved TFLOP/s", _tflops(o.achieved_tflops), _tflops(m.achieved_tflops), _ratio(r.get("achieved_tflops"))),
        ("MFU", _mfu(o) if so.repeats else "-", _mfu(m) if sm.repeats else "-", _ratio(r.get("mfu"))),
        ("communication share", _comm(o), _comm(m), ""),
        ("peak memory", _mem(o), _mem(m), _ratio(r.get("peak_memory_bytes"))),
        ("crash rate", _crash(so), _crash(sm), ""),
    ]
    return rows


def perf_caption(perf: StagePerf) -> str:
    cfg = perf.config
    m = perf.migrated or NOT_BENCHMARKED
    parts = [f"{cfg.steps if cfg else None} timed steps after {cfg.warmup if cfg else None} warm-up x "
             f"{cfg.repeats if cfg else None} repeats",
             f"{m.ranks if m.ranks is not None else 1} rank(s)" + (f", {cfg.variant}" if cfg and cfg.variant else ""),
             f"bf16 {cfg.bf16_policy if cfg else None}", (cfg.step if cfg else None) or ""]
    if perf.label:
        parts.insert(0, perf.label)
    if perf.original is not None and perf.original.skipped:
        parts.append(perf.original.skipped)
    return "; ".join(p for p in parts if p)


def scaling_text(lines: Sequence[ScalingRow]) -> str:
    if not lines:
        return ""
    unit = lines[0].unit.replace("_per_s", "/s")
    parts = []
    for ln in lines:
        if not ln.measured:
            parts.append(f"{ln.layout}: not measured")
        else:
            parts.append(f"{ln.layout} {_si(ln.throughput)} {unit} (efficiency {ln.efficiency:.3g})"
                         if ln.efficiency is not None else f"{ln.layout} {_si(ln.throughput)} {unit}")
    return "scaling (migrated): " + " -> ".join(parts) + "; efficiency = throughput(N) / (N x throughput(1))"
