"""Text renderings of the stage benchmarks (``perf`` in a stage's ``bench``), shared by the
terminal output, the Markdown summary and ``migrate report --validation``. No torch here."""

from __future__ import annotations

from typing import Any

KINDS = ("all-reduce", "all-gather", "reduce-scatter", "all-to-all")


def _si(v: float | None) -> str:
    if v is None:
        return "-"
    for div, unit in ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(v) >= div:
            return f"{v / div:.3g}{unit}"
    return f"{v:.3g}"


def _time(st: dict[str, Any] | None) -> str:
    if not st:
        return "-"
    med, iqr = st.get("median_s"), st.get("iqr_s", 0.0)
    if med is None:
        return "-"
    scale, unit = (1e3, "ms") if med < 1 else (1.0, "s")
    return f"{med * scale:.3g} {unit} (IQR {iqr * scale:.2g}, n={st.get('n')})"


def _tflops(v: float | None) -> str:
    if v is None:
        return "-"
    return f"{v:.3g}" if v >= 0.01 else f"{v:.2e}"


def _mfu(side: dict[str, Any]) -> str:
    if side.get("mfu") is not None:
        return f"{side['mfu'] * 100:.3g} %"
    return side.get("mfu_note") or "n/a: unknown peak"


def _comm(side: dict[str, Any]) -> str:
    comm = side.get("comm_share") or {}
    total = comm.get("total")
    if total is None:
        return "-"
    parts = [f"{k} {comm[k] * 100:.2g} %" for k in KINDS if comm.get(k)]
    return f"{total * 100:.3g} %" + (f" ({', '.join(parts)})" if parts else "")


def _mem(side: dict[str, Any]) -> str:
    b = side.get("peak_memory_bytes")
    if b is None:
        return "-"
    kind = side.get("peak_memory_kind") or ""
    return f"{b / 2 ** 20:.4g} MiB" + (" (host RSS)" if "RSS" in kind else "")


def _crash(side: dict[str, Any]) -> str:
    if "repeats" not in side:
        return "-"
    failed = side["repeats"] - side.get("ok_repeats", 0)
    text = f"{side.get('crash_rate', 0) * 100:.3g} % ({failed}/{side['repeats']})"
    if side.get("failures"):
        text += ": " + "; ".join(f"#{f['repeat']} {f['kind']}: {f['reason'][:120]}" for f in side["failures"][:3])
    return text


def _ratio(v: float | None) -> str:
    return "-" if v is None else f"{v:.3g}x"


def perf_rows(perf: dict[str, Any]) -> list[tuple[str, str, str, str]]:
    """(metric, original, migrated, migrated/original) rows of one stage's benchmark."""
    o, m, r = perf.get("original") or {}, perf.get("migrated") or {}, perf.get("ratio") or {}
    rows = [
        ("step time (median)", _time(o.get("step_time")), _time(m.get("step_time")), _ratio(r.get("step_time_median_s"))),
        ("samples/s", _si(o.get("samples_per_s")), _si(m.get("samples_per_s")), _ratio(r.get("samples_per_s"))),
        ("tokens/s", _si(o.get("tokens_per_s")), _si(m.get("tokens_per_s")), _ratio(r.get("tokens_per_s"))),
        ("model FLOPs/step (fwd+bwd)", _si(o.get("flops_per_step")), _si(m.get("flops_per_step")), ""),
        ("achieved TFLOP/s", _tflops(o.get("achieved_tflops")), _tflops(m.get("achieved_tflops")),
         _ratio(r.get("achieved_tflops"))),
        ("MFU", _mfu(o) if o.get("repeats") else "-", _mfu(m) if m.get("repeats") else "-", _ratio(r.get("mfu"))),
        ("communication share", _comm(o), _comm(m), ""),
        ("peak memory", _mem(o), _mem(m), _ratio(r.get("peak_memory_bytes"))),
        ("crash rate", _crash(o), _crash(m), ""),
    ]
    return rows


def perf_caption(perf: dict[str, Any]) -> str:
    cfg = perf.get("config") or {}
    m = perf.get("migrated") or {}
    parts = [f"{cfg.get('steps')} timed steps after {cfg.get('warmup')} warm-up x {cfg.get('repeats')} repeats",
             f"{m.get('ranks', 1)} rank(s)" + (f", {cfg['variant']}" if cfg.get("variant") else ""),
             f"bf16 {cfg.get('bf16_policy')}", cfg.get("step", "")]
    if perf.get("label"):
        parts.insert(0, perf["label"])
    if (perf.get("original") or {}).get("skipped"):
        parts.append(perf["original"]["skipped"])
    return "; ".join(p for p in parts if p)


def scaling_text(lines: list[dict[str, Any]]) -> str:
    if not lines:
        return ""
    unit = lines[0].get("unit", "samples_per_s").replace("_per_s", "/s")
    parts = []
    for ln in lines:
        if not ln.get("measured"):
            parts.append(f"{ln['layout']}: not measured")
        else:
            parts.append(f"{ln['layout']} {_si(ln['throughput'])} {unit} (efficiency {ln['efficiency']:.3g})"
                         if ln.get("efficiency") is not None else f"{ln['layout']} {_si(ln['throughput'])} {unit}")
    return "scaling (migrated): " + " -> ".join(parts) + "; efficiency = throughput(N) / (N x throughput(1))"
