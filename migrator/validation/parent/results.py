"""Validation results: frozen dataclasses, JSON (``migrator/ground/schema/validation.schema.json``), Markdown, text.

The JSON keeps the schema's required fields (``schema_version``, ``stages[]`` with ``id, name,
status, worst``) and adds, per stage, ``summary`` (one line), ``checks`` (named sub-checks such as
the fp32 logic check or S0's shape checks), ``counts`` (tensors per category and verdict),
``unmatched``, ``notes``; at the top level ``tool``, ``original``, ``migrated``, ``layers`` (the
reference layers each side ran under), ``manifest`` (seeds, determinism flags, weight / batch
sha256), ``exit_code`` and ``markdown`` (the summary ``migrate report --validation`` embeds).
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from migrator.ground.jsonfile import JsonObject

from migrator.ground.markdown_text import md_cell, md_code

from ..verdict import Verdict
from .comparison.compare import TensorVerdict
from .localisation.first_failure import WorstRow
from .perf.records import ScalingRow, StagePerf

STAGE_NAMES = {"S0": "plan", "S1": "parity-1card", "S2": "parity-dp", "S3": "parity-mp"}
STATUS_ORDER = (Verdict.PASS, Verdict.WARN, Verdict.FAIL, Verdict.NOT_RUN, Verdict.ERROR)


@dataclass(frozen=True)
class StageResult:
    id: str
    status: Verdict  # a plain string is read as its Verdict (an unknown one is a ValueError)
    summary: str = ""
    reason: str | None = None
    first_divergence: str | None = None
    worst: tuple[WorstRow, ...] = ()
    checks: tuple[dict[str, Any], ...] = ()
    counts: dict[str, Any] = field(default_factory=dict)
    bench: dict[str, float] = field(default_factory=dict)  # seconds, ranks, ...
    unmatched: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()
    perf: StagePerf | None = None  # --bench: the stage's benchmark (JSON: bench.perf)
    # every compared tensor, in the run's order: `--csv` (msprobe's layout); not in the JSON, whose
    # `worst` and `counts` summarise them
    compared: tuple[TensorVerdict, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "status", Verdict(self.status))

    @property
    def name(self) -> str:
        return STAGE_NAMES[self.id]

    def to_json(self) -> JsonObject:
        out: dict[str, Any] = {"id": self.id, "name": self.name, "status": self.status,
                               "worst": [_clean(dict(r)) for r in self.worst]}
        if self.reason:
            out["reason"] = self.reason
        if self.first_divergence:
            out["first_divergence"] = self.first_divergence
        if self.bench or self.perf is not None:
            out["bench"] = _clean({**self.bench, **({"perf": self.perf.to_json()} if self.perf is not None else {})})
        out["summary"] = self.summary
        out["checks"] = [_clean(c) for c in self.checks]
        out["counts"] = _clean(self.counts)
        out["unmatched"] = {"count": len(self.unmatched), "examples": list(self.unmatched[:20])}
        out["notes"] = list(self.notes)
        return out


@dataclass(frozen=True)
class ValidationResult:
    original: str
    migrated: str | None
    stages: tuple[StageResult, ...]
    layers: dict[str, Any] = field(default_factory=dict)
    manifest: dict[str, Any] = field(default_factory=dict)
    work_dir: str | None = None
    notes: tuple[str, ...] = ()
    mode: str = "protocol"
    scaling: tuple[ScalingRow, ...] | None = None   # --bench: 1 card -> N ranks (JSON: bench.scaling)

    @property
    def exit_code(self) -> int:
        """0: every run stage passes or warns; 1: a stage fails; 2: the validation could not run."""
        statuses = [s.status for s in self.stages]
        if Verdict.ERROR in statuses:
            return 2
        if Verdict.FAIL in statuses:
            return 1
        return 0

    def stage(self, sid: str) -> StageResult | None:
        for s in self.stages:
            if s.id == sid:
                return s
        return None

    def to_json(self) -> JsonObject:
        from migrator import __version__

        return {
            "schema_version": 1,
            "tool": {"name": "ascend-migrate", "version": __version__, "command": "migrate validate"},
            "mode": self.mode,
            "original": self.original,
            "migrated": self.migrated,
            "exit_code": self.exit_code,
            "stages": [s.to_json() for s in self.stages],
            "layers": _clean(self.layers),
            "manifest": _clean(self.manifest),
            "notes": list(self.notes),
            **({"bench": _clean({"scaling": [r.to_json() for r in self.scaling]})} if self.scaling is not None else {}),
            "markdown": self.markdown(),
        }

    # ------------------------------------------------------------------ renderings
    def text(self, verbose: bool = False) -> str:
        """The stage table; under each run stage its checks (failing and warning ones, every one
        with ``verbose``) with metric, value and threshold, and the msprobe metrics of its worst tensor."""
        lines = [f"migrate validate: {self.original} -> {self.migrated or '(none)'}", ""]
        width = max(len(s.name) for s in self.stages) if self.stages else 12
        lines.append(f"{'stage':<6}{'name':<{width + 2}}{'status':<9}details")
        for s in self.stages:
            detail = s.summary or s.reason or ""
            lines.append(f"{s.id:<6}{s.name:<{width + 2}}{s.status:<9}{detail}")
            if s.first_divergence and s.status in (Verdict.FAIL, Verdict.WARN):
                lines.append(f"{'':<{width + 17}}first divergence: {s.first_divergence}")
            if s.reason and s.summary and s.status in (Verdict.FAIL, Verdict.ERROR, Verdict.NOT_RUN):
                lines.append(f"{'':<{width + 17}}{s.reason}")
            lines += [f"{'':<{width + 17}}{line}" for line in _check_lines(s, verbose)]
            if s.perf is not None:
                lines += _perf_text(s.perf)
        if self.scaling:
            from .perf.benchreport import scaling_text

            lines.append(scaling_text(self.scaling))
        lines.append("")
        for line in self._layer_lines():
            lines.append(line)
        for note in self.notes:
            lines.append(f"note: {note}")
        return "\n".join(lines) + "\n"

    def _layer_lines(self) -> Iterator[str]:
        for side in ("original", "migrated"):
            used = (self.layers or {}).get(side)
            if used:
                lines = "; ".join(f"{k}: {v}" for k, v in used.items())
                yield f"{side} side ran under reference layers -> {lines}"
            elif side in (self.layers or {}):
                yield f"{side} side ran on the real packages and device (no reference layer)"

    def markdown(self) -> str:
        out = ["### `migrate validate`", "",
               f"Original {md_code(self.original)} → migrated {md_code(self.migrated or '(none)')} — exit code **{self.exit_code}**.", "",
               "| Stage | Name | Status | Details |", "|---|---|---|---|"]
        for s in self.stages:
            detail = _md(s.summary or s.reason or "")
            if s.first_divergence and s.status in (Verdict.FAIL, Verdict.WARN):
                detail += f"<br>first divergence: {md_code(s.first_divergence)}"
            if s.reason and s.summary and s.status in (Verdict.FAIL, Verdict.ERROR, Verdict.NOT_RUN):
                detail += f"<br>{_md(s.reason)}"
            out.append(f"| {s.id} | {s.name} | **{s.status}** | {detail} |")
        out.append("")
        for s in self.stages:
            if s.checks:
                out += [f"**{s.id} checks**", "", "| check | status | metric | worst | threshold |",
                        "|---|---|---|---|---|"]
                out += [f"| {_md(c['check'])} | {c.get('status', '')} | {c.get('metric', '')} | "
                        f"{_num(c.get('worst'))} | {_num(c.get('threshold'))} |" for c in s.checks]
                out.append("")
            out += _worst_markdown(s)
        for s in self.stages:
            perf = s.perf
            if perf is not None and not perf.skipped:
                from .perf.benchreport import perf_caption, perf_rows

                out += [f"**{s.id} benchmark** ({_md(perf_caption(perf))})", "",
                        "| metric | original | migrated | migrated/original |", "|---|---|---|---|"]
                out += [f"| {a} | {_md(b)} | {_md(c)} | {d} |" for a, b, c, d in perf_rows(perf)]
                out.append("")
        if self.scaling:
            from .perf.benchreport import scaling_text

            out += [_md(scaling_text(self.scaling)), ""]
        layers = list(self._layer_lines())
        if layers:
            out += ["", "Reference layers (CPU stand-ins, used only where the real package is absent):", ""]
            out += [f"- {_md(line)}" for line in layers]
        for note in self.notes:
            out.append(f"- note: {_md(note)}")
        return "\n".join(out) + "\n"


def _check_lines(stage: StageResult, verbose: bool) -> list[str]:
    out = []
    for c in stage.checks:
        if not verbose and c.get("status") == Verdict.PASS:
            continue
        value = f"{c.get('metric', 'worst')} {_num(c.get('worst'))}" if c.get("worst") is not None else ""
        bound = f" (threshold {_num(c['threshold'])})" if c.get("threshold") is not None else ""
        where = f" at {c['worst_tensor']}" if c.get("worst_tensor") else ""
        tail = f"; {c['message']}" if c.get("message") else ""
        out.append(f"{c.get('status', '')}: {c['check']}: {value}{bound}{where}{tail}".replace(":  ", ": "))
    worst = next((r for r in stage.worst if r.get("msprobe")), None)
    if worst is not None and (verbose or stage.status in (Verdict.FAIL, Verdict.WARN)):
        metrics = ", ".join(f"{k} {_num(v)}" for k, v in worst["msprobe"].items())
        out.append(f"msprobe metrics of {worst['tensor']} vs R: {metrics}")
    return out


def _worst_markdown(stage: StageResult) -> list[str]:
    """A stage's worst tensors as a collapsed Markdown table (failing and warning ones, else the first four)."""
    rows = [r for r in stage.worst if r.get("status") in (Verdict.FAIL, Verdict.WARN)][:8] or list(stage.worst[:4])
    if not rows:
        return []
    out = [f"<details><summary>{stage.id} worst tensors</summary>", "",
           "| tensor | category | metric | value | threshold | status | cosine | max abs | max rel | ‰ ratio |",
           "|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        m = r.get("msprobe") or {}
        out.append(f"| {md_code(r['tensor'])} | {_md(r['category'])} | {_md(r['metric'])} | {_num(r['value'])} | "
                   f"{_num(r.get('threshold'))} | {r.get('status', '')} | {_num(m.get('cosine'))} | "
                   f"{_num(m.get('max_abs'))} | {_num(m.get('max_rel'))} | {_num(m.get('thousandth'))} |")
    return out + ["", "</details>", ""]


def _perf_text(perf: StagePerf) -> list[str]:
    from .perf.benchreport import perf_caption, perf_rows

    if perf.skipped:
        return [f"{'':6}bench: {perf.skipped}"]
    out = [f"{'':6}bench: {perf_caption(perf)}",
           f"{'':8}{'metric':<28}{'original':<30}{'migrated':<30}migrated/original"]
    for a, b, c, d in perf_rows(perf):
        out.append(f"{'':8}{a:<28}{b:<30}{c:<30}{d}")
    return out


def _md(text: Any) -> str:
    """The program's own text (errors, tensor and check names) as a table cell: escaped as `report --format md`
    escapes, so `<script>` or `<img onerror>` in an error message stays text."""
    return md_cell(text)


def _num(v: Any) -> str:
    if v is None:
        return ""
    if isinstance(v, float):
        if v >= 1e300:
            return "inf"
        return f"{v:.3g}"
    return str(v)


def _clean(value: Any) -> Any:
    """JSON-safe copy: non-finite floats become the largest double (the schema wants numbers)."""
    if isinstance(value, float):
        if math.isnan(value) or math.isinf(value):
            return 1.7976931348623157e308 if (math.isinf(value) and value > 0) or math.isnan(value) else -1.7976931348623157e308
        return value
    if isinstance(value, dict):
        return {str(k): _clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_clean(v) for v in value]
    return value
