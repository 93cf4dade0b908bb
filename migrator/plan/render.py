"""Plain-text rendering of a finished PlanResult (no computation here)."""

from __future__ import annotations

from typing import Protocol

from .cluster_plan import ClusterPlan
from .estimate import Estimate
from .model import ModelShape
from .search import duration


class PlanView(Protocol):
    """What the renderers read of a `runner.PlanResult` (which calls them, so they cannot import it)."""

    @property
    def model(self) -> ModelShape: ...
    @property
    def global_batch(self) -> int: ...
    @property
    def seq(self) -> int: ...
    @property
    def dtype(self) -> str: ...
    @property
    def clusters(self) -> tuple[ClusterPlan, ...]: ...
    @property
    def explain(self) -> tuple[str, ...]: ...


def _gb(x: float) -> str:
    return f"{x / 1e9:.1f} GB"


# Below this the cluster figures (step time, MFU, communication share) describe no real run: a model
# this small is latency-bound, which the analytic model does not price.
TOY_PARAMETERS = 100_000_000


def parameters(total: int) -> str:
    """`7.24B parameters`, `124M parameters`, `77,760 parameters` (never `7.78e-05B`)."""
    if total >= 1e9:
        return f"{total / 1e9:.3g}B parameters"
    if total >= 1e6:
        return f"{total / 1e6:.3g}M parameters"
    return f"{total:,} parameters"


def toy_note(total: int) -> str:
    return ("" if total >= TOY_PARAMETERS else
            f" (a toy model: under {TOY_PARAMETERS // 1_000_000}M parameters the step times and MFU below are "
            "the analytic model's, not what a cluster would show; plan the full-size config with --model)")


def text(result: PlanView) -> str:
    m = result.model
    p = m.params()
    lines = [f"model {m.name}: {parameters(p['total'])} ({m.layers} layers, hidden {m.hidden}, "
             f"{m.heads} heads / {m.kv_heads} kv" + (f", {m.experts} experts top-{m.top_k}" if m.moe else "")
             + f"; from {m.source})" + toy_note(p["total"]),
             f"global batch {result.global_batch} x seq {result.seq}, {result.dtype}", ""]
    for cp in result.clusters:
        c = cp.cluster
        lines.append(f"== {c.name}: {c.title}" + ("" if cp.error else
                                                     f" ({cp.world} devices; {cp.considered} layouts considered)"))
        if cp.error:
            lines += [f"   not planned: {cp.error}", ""]
            continue
        if cp.problems:
            lines += ["   the given layout cannot run here:"] + [f"   - {p}" for p in cp.problems]
        if not cp.top:
            lines += [f"   {w}" for w in cp.why] + provenance(cp, result.dtype, bool(result.explain)) + [""]
            continue
        for i, e in enumerate(cp.top, 1):
            lines += [f"{'given' if cp.given else i}. {e.layout.label()}", *breakdown(e)]
        lines.append("   why: " + "; ".join(cp.why))
        f = cp.fault
        if f:
            lines.append(f"   faults: {f.failure_rate:.2g} failures per device-hour -> job MTBF {f.mtbf_h:.1f} h; "
                         f"one failure stops {f.blast_devices} device(s) ({f.blast_reason})")
            lines.append("   checkpoint: " + (f"write {f.checkpoint_write_s:.0f} s -> every {f.interval_h:.2f} h "
                                              "(Young/Daly sqrt(2 C MTBF))" if f.interval_h else f.missing))
        lines.append(f"   S0: {cp.s0['command']}  ({cp.s0['note']})")
        if "status" in cp.s0:
            lines.append(f"   S0 result: {cp.s0['status']}: {cp.s0['summary']}")
        lines += provenance(cp, result.dtype, bool(result.explain))
        lines.append("")
    if result.explain:
        lines += ["assumptions (value: source):"] + [f"   {line}" for line in result.explain] + [""]
    return "\n".join(lines)


def provenance(cp: ClusterPlan, dtype: str, explain: bool) -> list[str]:
    """Which figures are not first-party, by kind; with --explain every figure, its kind and source."""
    used = cp.cluster.used(dtype)
    kinds: dict[str, list[str]] = {}
    for key, fig in used:
        if fig.flag != "first-party":
            kinds.setdefault(fig.flag, []).append(key)
    out = [f"   figures {kind} (not first-party): {', '.join(keys)}" for kind, keys in kinds.items()]
    if explain:
        out += ["   figures (value, kind: source):"] + [f"   - {k} = {f.value:g}, {f.flag}: {f.source.removeprefix(f.flag + ': ')}" for k, f in used]
        if cp.cluster.calibration:  # plan --calibrate: the efficiencies and each run's step, before and after
            out += ["   calibration (its efficiencies replace the assumptions of the same name here):"] + \
                [f"   - {line}" for line in cp.cluster.calibration]
    return out


def _comm(e: Estimate, table: dict[str, float]) -> str:
    return ", ".join(f"{k} {v / e.step_s:.1%} ({e.comm_links.get(k, '?')})" for k, v in table.items() if v) or "none"


def breakdown(e: Estimate) -> list[str]:
    """One estimate: step, compute by part, each collective on its link (exposed and overlapped), the
    schedule's bubble, memory by kind."""
    mem = e.memory
    compute = ", ".join(f"{k.split(': ')[1]} {v / e.step_s:.1%}" for k, v in e.compute_parts.items())
    kinds = ", ".join(f"{k} {_gb(v)}" for k, v in mem.items() if k != "total")
    return [f"   step {duration(e.step_s)}, MFU {e.mfu:.1%}, {e.achieved_tflops:.0f} TFLOP/s per device, "
            f"{e.microbatches} micro-batches",
            f"   compute {e.compute_s / e.step_s:.1%}: {compute or 'none'}",
            f"   communication exposed {e.comm_share:.1%}: {_comm(e, e.comm_s)}",
            f"   communication overlapped (hidden behind compute): {_comm(e, e.overlapped_s)}",
            f"   pipeline bubble {e.bubble:.1%} (schedule {e.schedule})",
            f"   memory per device {_gb(mem['total'])} ({kinds})" + ("" if e.fits else " - does not fit")]


def markdown(result: PlanView) -> str:
    """The plan as Markdown (embedded in the plan JSON; `migrate report --plan` shows it)."""
    m = result.model
    total = m.params()["total"]
    out = [f"Model **{m.name}**: {parameters(total)}, global batch {result.global_batch} "
           f"x seq {result.seq}, {result.dtype}{toy_note(total)}.", ""]
    for cp in result.clusters:
        out += [f"#### {cp.cluster.name}: {cp.cluster.title}", ""]
        if cp.error:
            out += [f"Not planned: {cp.error}", ""]
            continue
        if cp.problems:
            out += ["The given layout cannot run: " + "; ".join(cp.problems) + ".", ""]
        if not cp.top:
            out += ["; ".join(cp.why), ""]
            continue
        out += ["| # | layout | step | MFU | memory / device | communication | bubble |", "|---|---|---|---|---|---|---|"]
        for i, e in enumerate(cp.top, 1):
            comm = _comm(e, e.comm_s)
            out.append(f"| {i} | {e.layout.label()} | {duration(e.step_s)} | {e.mfu:.1%} | "
                       f"{_gb(e.memory['total'])} | {e.comm_share:.1%}: {comm} | {e.bubble:.1%} |")
        out += ["", "Why: " + "; ".join(cp.why) + "."]
        if cp.fault:
            f = cp.fault
            out.append(f"Faults: job MTBF {f.mtbf_h:.1f} h at {f.failure_rate:.2g} failures per device-hour; one "
                       f"failure stops {f.blast_devices} device(s); checkpoint "
                       + (f"every {f.interval_h:.2f} h." if f.interval_h else f"interval unknown ({f.missing})."))
        out.append(f"S0: `{cp.s0['command']}` ({cp.s0['note']})"
                   + (f": **{cp.s0['status']}**" if "status" in cp.s0 else "") + ".")
        out.append("")
    return "\n".join(out)
