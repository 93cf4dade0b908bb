"""The stage kit: what every stage module (:mod:`.stages`) builds on.

A stage is ``run(ctx: StageContext) -> StageResult``; the context carries the settings, the two trees,
the work folder and what earlier stages found. The kit adds the setup error, progress lines, the migrate
step handed in by the api, the texts of a side that failed, and the :class:`StageResult` of a numeric
comparison (:func:`numeric_stage`). Everything here is public and used by more than one stage.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..facts import CheckRow
from ..records import Provenance, SideStatus, Status
from ..verdict import Verdict, worst
from .comparison.compare import Comparison, Run, TensorVerdict
from .localisation.first_failure import localise, summary_counts, worst_rows
from .options import Options
from .results import StageResult

Progress = Callable[[str], None] | None

MigrateStep = Callable[[str, str], list[str]]
"""``migrate(original, out_dir)``: write the migrated tree into ``out_dir``; return error lines (none: done).
The api passes `migrate fix --target npu` in, so this package never imports the api."""


@dataclass
class StageContext:
    """One validation run as its stages see it: settings and folders (fixed once the run starts), then what
    the stages hand on to each other (filled in as they run, in order)."""

    opts: Options
    original: str  # the original tree (absolute)
    migrated: str  # the migrated tree (absolute; the original itself with --record)
    work: str  # this run's work folder: dumps, statuses, jobs
    shared: str  # the original side's folder: bf16-rounded weights, batches, its dumps
    manifest: dict[str, Any]  # the result's manifest: settings, hashes, determinism, devices
    progress: Progress = None
    recorded: SideStatus | None = None  # the reference side recorded elsewhere (--compare)
    layers: dict[str, dict[str, str]] = field(default_factory=dict)  # side -> reference layers used
    imports: dict[str, Provenance] = field(default_factory=dict)  # side -> where its project modules came from
    declared_stages: list[str] | None = None  # the program's parallelize stages, known once S0 ran
    stage: str = ""  # the stage now running (set by the driver before each stage runs)

    def say(self, text: str) -> None:
        """A progress line (nothing without a progress callback)."""
        say(self.progress, text)

    def note_imports(self, statuses: Mapping[str, Status]) -> None:
        """Keep each side's provenance facts (the first status of a side that has them)."""
        for side, status in statuses.items():
            if status.provenance is not None:
                self.imports.setdefault(side, status.provenance)

    def import_notes(self) -> list[str]:
        """One line per side: which tree its project modules came from (issue 37: each side its own)."""
        lines = []
        for side, facts in sorted(self.imports.items()):
            modules = ", ".join(facts.own_modules) or "none besides the entry script"
            line = f"imports: the {side} side's project modules came from its own tree {facts.tree} ({modules})"
            if facts.served:
                line += f"; found at the tree root or src/ by name: {', '.join(facts.served)}"
            mapped = [r for r in facts.redirected if r.own]
            if mapped:
                line += f"; {len(mapped)} place(s) of the other tree mapped to this tree's copy"
            lines.append(line)
        return lines


class ValidationSetupError(Exception):
    """The validation cannot start (bad arguments, no migrated tree): exit 2."""


# ------------------------------------------------------------------------------------ texts
def say(progress: Progress, text: str) -> None:
    """A progress line (nothing without a progress callback)."""
    if progress is not None:
        progress(text)


def fmt_value(value: float | None) -> str:
    """A metric value for a summary line: 3 significant digits, ``-`` for none, ``inf`` for the overflow marker."""
    if value is None:
        return "-"
    if value >= 1e300:
        return "inf"
    return f"{value:.3g}"


def failure_text(status: Status) -> str:
    """What went wrong on one side, for a stage's reason: the phase, the summary, and whose bug it is."""
    err = status.error
    if err is None:
        return "unknown error"
    text = f"during {err.during}: {err.summary}" if err.during else err.summary
    if err.harness_frame:
        text = f"harness error (a bug in migrate validate, not in the program) {text}; raised in our code at " \
               f"{err.harness_frame}"
    return text


def could_not_run(side: str, status: Status) -> str:
    """The summary of a stage one side could not run: a harness error names itself."""
    if status.error is not None and status.error.harness_frame:
        return f"harness error on the {side} side"
    return f"{side} side could not run"


def crash_module(status: Status) -> str | None:
    """The innermost module running when the program raised (a crashed stage's first divergence)."""
    active = status.error.active_modules if status.error else ()
    return f"{active[-1]} (raised while running)" if active else None


def check_rows(verdicts: Sequence[TensorVerdict]) -> list[dict[str, Any]]:
    """Named sub-checks of a numeric stage, each with its worst value and verdict."""
    groups = {
        "fp32 logic (T32 vs G, rel_l2)": ("rel_l2_fp32", "mismatch_fp32", "grad_missing", "norm_rel_fp32"),
        "bf16 tolerance (ratio to golden)": ("ratio", "rel_l2_abs"),
        "grad-norm ratio |‖T‖/‖R‖-1|": ("grad_norm",),
        "loss at step 0 (vs R, 2^-8)": ("loss_rel",),
        "error balance vs G, above R's own (activations)": ("error_balance",),
        "routing (exact)": ("mismatch_bf16",),
        "same tensors and shapes on both sides": ("unmatched",),
        "dtypes under the bf16 policy (narrower than the original: warn)": ("dtype",),
        "precision policy (share of activations in a wider dtype)": ("dtype_policy",),
        "params after k training steps, fp32 (ΔT32 vs ΔG, rel_l2)": ("train_rel_l2_fp32",),
        "params after k training steps, bf16 (ratio to golden)": ("train_ratio",),
    }
    rows = []
    for label, metrics in groups.items():
        found = [(c, v) for v in verdicts if v.category != "optimizer" for c in v.checks if c.metric in metrics]
        if not found:
            continue
        worst_c, worst_v = max(found, key=lambda cv: (cv[0].status == Verdict.FAIL, cv[0].status == Verdict.WARN,
                                                      cv[0].value / cv[0].threshold if cv[0].threshold else cv[0].value))
        rows.append({"check": label, "status": worst(c.status for c, _ in found), "tensors": len(found),
                     "worst": worst_c.value, "threshold": worst_c.threshold, "metric": worst_c.metric,
                     "worst_tensor": f"{worst_v.label}{worst_v.name}"})
    opt = [v for v in verdicts if v.category == "optimizer"]
    if opt:
        top = max(opt, key=lambda v: v.checks[0].value)
        rows.append({"check": "optimizer in isolation (fp32 updates, rel_l2)", "status": worst(v.status for v in opt),
                     "tensors": len(opt), "worst": top.checks[0].value, "threshold": top.checks[0].threshold,
                     "metric": top.checks[0].metric, "worst_tensor": top.name})
    return rows


def _numeric_summary(verdicts: Sequence[TensorVerdict], extra: str = "") -> str:
    def worst_value(metric: str, cats: Iterable[str] | None = None) -> float | None:
        cats = tuple(cats) if cats is not None else None
        vals = [c.value for v in verdicts if cats is None or v.category in cats for c in v.checks if c.metric == metric]
        return max(vals) if vals else None

    parts = [f"{len(verdicts)} tensors"]
    f32 = worst_value("rel_l2_fp32")
    if f32 is not None:
        parts.append(f"fp32 max rel_l2 {fmt_value(f32)}")
    ratios = [(lbl, worst_value("ratio", cats)) for lbl, cats in (("fwd", ("forward",)), ("bwd", ("backward",)),
                                                             ("grad", ("param_grad",)))]
    if any(r is not None for _, r in ratios):
        parts.append("bf16 worst ratio " + " / ".join(f"{lbl} {fmt_value(r)}" for lbl, r in ratios if r is not None))
    absolute = worst_value("rel_l2_abs")
    if absolute is not None:
        parts.append(f"bf16 max rel_l2 vs golden {fmt_value(absolute)} (absolute bounds)")
    opt = worst_value("rel_l2_fp32", ("optimizer",))
    if opt is not None:
        parts.append(f"optimizer max rel_l2 {fmt_value(opt)}")
    unmatched = sum(1 for v in verdicts for c in v.checks if c.metric == "unmatched")
    if unmatched:
        parts.append(f"{unmatched} tensor(s) on one side only or of another shape")
    return "; ".join(parts) + (f"; {extra}" if extra else "")


def numeric_stage(sid: str, comparison: Comparison, *, bench: Mapping[str, float], notes: list[str],
                  extra_summary: str = "", extra_checks: tuple[CheckRow, ...] = ()) -> StageResult:
    """The result of a stage that compared tensors: its verdict, the first divergence, check rows, counts."""
    verdicts = comparison.verdicts
    status: Verdict = worst([v.status for v in verdicts] + [c["status"] for c in extra_checks])
    loc = localise(verdicts)
    reason = None
    if comparison.nonfinite:
        reason = f"NaN/Inf in the migrated run, first in {comparison.nonfinite}"
    elif status == Verdict.FAIL and loc is not None:
        reason = f"{loc.metric} {fmt_value(loc.value)} > {fmt_value(loc.threshold)} at {loc.tensor}"
    elif status == Verdict.FAIL:
        failed = [c for c in extra_checks if c["status"] == Verdict.FAIL]
        reason = failed[0].get("message") if failed else None
    if not verdicts and status != Verdict.FAIL:
        status = Verdict.ERROR
        reason = "no tensors could be compared"
    stats_only = sum(1 for v in verdicts if v.check("norm_rel_fp32") is not None)
    if stats_only:
        notes = notes + [f"{stats_only} tensor(s) beyond --max-dump-mb compared by statistics only "
                         "(|‖T32‖-‖G‖|/‖G‖, a lower bound of rel_l2; no bf16 ratio)"]
    summary = _numeric_summary(verdicts, extra_summary)
    if comparison.nonfinite:  # the fp32 figures would read as a clean run
        summary = f"NaN/Inf in the migrated bf16 run (first: {comparison.nonfinite}); " + summary
    return StageResult(
        id=sid, status=status, summary=summary, reason=reason,
        first_divergence=loc.text() if loc is not None else None,
        worst=tuple(worst_rows(verdicts)), checks=tuple(check_rows(verdicts)) + tuple(dict(c) for c in extra_checks),
        counts=summary_counts(verdicts), bench=dict(bench), unmatched=tuple(comparison.unmatched),
        notes=tuple(notes + comparison.notes), compared=tuple(verdicts),
    )



# ------------------------------------------------------------------------------------ setup
def migrate_tree(original: str, work: str, progress: Progress, migrate: MigrateStep | None) -> str:
    """Write the migrated copy of ``original`` into ``work/migrated`` with the migrate step; its folder."""
    if migrate is None:
        raise ValidationSetupError("no migrated tree given (--migrated) and no migrate step to make one")
    out = os.path.join(work, "migrated")
    say(progress, f"migrate fix --target npu --out {out}")
    errors = migrate(original, out)
    if errors:
        raise ValidationSetupError("migrate fix failed: " + "; ".join(errors))
    return out


def required_run(run_dir: str | None, what: str) -> Run:
    """The dump a side's status names (an ok status always names it: a missing one is a harness bug)."""
    run = Run.load(run_dir)
    if run is None:
        raise RuntimeError(f"the {what} run left no dump (status names no folder)")
    return run
