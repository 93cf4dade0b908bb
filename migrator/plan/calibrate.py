"""`migrate plan --calibrate RUN.json`: fit a cluster's efficiencies to measured step times, and store them.

The fit moves the compute efficiency (the GEMM and attention-kernel efficiencies together, in the ratio of
their defaults, each at most 1) until the model's step for the run's layout equals the measured one; with
two or more runs whose predicted step depends on the links, the link efficiency too, by least squares on
the relative errors. Bounds: 0.01 <= efficiency <= 1 (a fit that hits one is clamped and says so). A
measured step faster than the model gives with every efficiency at 1 is impossible under the cluster's
peak figures: refused, naming the file. The result is written as figures flagged `calibrated` under
`[tool.migrate.clusters.NAME]` (the file, its sha256 and the date as source; `calibration.lines` says the
before and after for `plan --explain`) through `measure.write_profile`, the rest of the file unchanged.
"""

from __future__ import annotations

import datetime
import math
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from .assumptions import Assumptions
from .calibrate_input import MeasuredRun
from .clusters import Cluster, ClusterError
from .estimate import Job, estimate, layout_problems
from .model import ModelError, ModelShape
from .search import duration

EFFICIENCY_MIN = 0.01
COMPUTE_KEYS = ("gemm_efficiency", "attention_efficiency")
LINK_KEY = "link_efficiency"


class CalibrationError(ClusterError):
    """A calibration refused (impossible run, a figure it cannot replace); the message names the file."""


@dataclass(frozen=True)
class RunFit:
    run: MeasuredRun
    before_s: float   # predicted with the uncalibrated efficiencies
    after_s: float    # predicted with the fitted ones
    peak_s: float     # predicted with every efficiency at 1

    def line(self) -> str:
        lay = self.run.layout
        return (f"{self.run.label()}: {lay.spec()}, global batch {self.run.global_batch} x seq {self.run.seq}: "
                f"measured {duration(self.run.step_time_s)}; predicted before {duration(self.before_s)}, after "
                f"{duration(self.after_s)} ({self.after_s / self.run.step_time_s - 1:+.1%})")


@dataclass(frozen=True)
class Calibration:
    cluster: str
    before: dict[str, float]   # efficiency -> uncalibrated value
    after: dict[str, float]    # efficiency -> fitted value (the ones written)
    runs: tuple[RunFit, ...]
    notes: tuple[str, ...]     # a bound hit, a term not fitted
    date: str

    def source(self) -> str:
        """The calibrated figures' source: the files, their sha256 and the date."""
        files = sorted({(Path(f.run.file).name, f.run.sha256[:16]) for f in self.runs})
        return (f"migrate plan --calibrate {', '.join(f'{n} (sha256 {h})' for n, h in files)}, {self.date}: "
                f"{len(self.runs)} measured run(s)")

    def lines(self) -> list[str]:
        """Before and after: each efficiency, then each run's measured and predicted step."""
        effs = [f"{k} {self.before[k]:.3g} -> {self.after[k]:.3g}" for k in self.after]
        return [f"calibrated {self.date} on {len(self.runs)} run(s): {', '.join(effs)}",
                *(f.line() for f in self.runs), *self.notes]


def _table(calibration: Calibration) -> dict[str, Any]:
    """The figures and the record for `[tool.migrate.clusters.NAME]`."""
    out: dict[str, Any] = {k: {"value": float(f"{v:.4g}"), "flag": "calibrated", "source": calibration.source()}
                           for k, v in calibration.after.items()}
    files = sorted({(f.run.file, f.run.sha256) for f in calibration.runs})
    out["calibration"] = {"date": calibration.date, "files": [f"{p} sha256:{h}" for p, h in files],
                          "lines": calibration.lines()}
    return out


def _predict(run: MeasuredRun, model: ModelShape, cluster: Cluster, base: Assumptions, dtype: str,
             effs: dict[str, Any]) -> float:
    job = Job(model, run.global_batch, run.seq, run.dtype or dtype, replace(base, **effs))
    return estimate(job, cluster.with_devices(run.layout.world), run.layout).step_s


def _golden(f: Callable[[float], float], lo: float, hi: float, steps: int = 60) -> float:
    """The minimum of a unimodal f on [lo, hi]."""
    ratio = (math.sqrt(5) - 1) / 2
    a, b = lo, hi
    for _ in range(steps):
        c, d = b - ratio * (b - a), a + ratio * (b - a)
        if f(c) <= f(d):
            b = d
        else:
            a = c
    return (a + b) / 2


def fit(runs: list[MeasuredRun], model_of: Callable[[MeasuredRun], ModelShape], cluster: Cluster,
        base: Assumptions, dtype: str = "bf16", today: str | None = None) -> Calibration:
    """Fit `cluster`'s efficiencies to the runs (see the module docstring). `base`: the uncalibrated
    assumptions (the defaults with --assume)."""
    compute0 = {k: getattr(base, k) for k in COMPUTE_KEYS}
    link0 = base.link_efficiency

    def effs(log_scale: float, link: float) -> dict[str, float]:
        scale = math.exp(log_scale)
        return {**{k: min(1.0, max(EFFICIENCY_MIN, v * scale)) for k, v in compute0.items()}, LINK_KEY: link}

    lo, hi = math.log(EFFICIENCY_MIN / max(compute0.values())), math.log(1 / min(compute0.values()))
    for run in runs:
        _check_layout(run, model_of(run), cluster, base, dtype)
    peaks = [_predict(r, model_of(r), cluster, base, dtype, effs(hi, 1.0)) for r in runs]
    for run, peak in zip(runs, peaks):
        if run.step_time_s < peak:
            raise CalibrationError(
                f"{run.file}: {run.where}: step_time_s {run.step_time_s:.4g} s is faster than {cluster.name!r} "
                f"allows at its peak figures: {peak:.4g} s with every GEMM, attention kernel and link at 100% "
                f"({_figures(cluster, run.dtype or dtype)}); "
                "check the layout, global batch, sequence and model of the run, and the cluster's figures")

    def error(log_scale: float, link: float) -> float:
        return sum((_predict(r, model_of(r), cluster, base, dtype, effs(log_scale, link)) / r.step_time_s - 1) ** 2
                   for r in runs)

    notes = []
    link_matters = len(runs) > 1 and any(
        abs(_predict(r, model_of(r), cluster, base, dtype, effs(0.0, 1.0))
            - _predict(r, model_of(r), cluster, base, dtype, effs(0.0, 0.5))) > 1e-3 * r.step_time_s for r in runs)
    if link_matters:
        link = _golden(lambda le: error(_golden(lambda s: error(s, le), lo, hi, 40), le), EFFICIENCY_MIN, 1.0, 30)
    else:
        link = link0
        notes.append(f"{LINK_KEY} not fitted ({link0:g} kept): " + (
            "one run fits one term" if len(runs) == 1 else "the runs' predicted steps do not depend on the links"))
    scale = _golden(lambda s: error(s, link), lo, hi)
    fitted = effs(scale, link)
    for key, value in fitted.items():
        if key == LINK_KEY and not link_matters:
            continue
        if value >= 1.0 - 1e-6 or value <= EFFICIENCY_MIN * (1 + 1e-6):
            notes.append(f"{key} clamped at {value:g}: the measured step" + (
                " is slower than the model gives at the lowest efficiency" if value < 0.5 else
                " needs more than 100% of the peak here; the rest is left to the other terms"))
    after = {k: v for k, v in fitted.items() if k != LINK_KEY or link_matters}
    fits = tuple(RunFit(r, _predict(r, model_of(r), cluster, base, dtype, {}),
                        _predict(r, model_of(r), cluster, base, dtype, after), peak) for r, peak in zip(runs, peaks))
    return Calibration(cluster.name, {**compute0, LINK_KEY: link0}, after, fits, tuple(notes),
                       today or datetime.date.today().isoformat())


def model_of_runs(model: str | Path | None, entry: str | None = None) -> Callable[[MeasuredRun], ModelShape]:
    """A run's model: its own, else the command's MODEL (a tree probed once, or a config); none is a
    ModelError naming the run."""
    loaded: list[ModelShape] = []

    def model_of(run: MeasuredRun) -> ModelShape:
        if run.model is not None:
            return run.model
        if model is None:
            raise ModelError(f"{run.file}: {run.where}: the run names no model: give MODEL (a tree) or --model "
                             "CONFIG, or a \"model\" field")
        if not loaded:
            from .configs import from_config
            from .probe import probe_tree

            path = Path(model)
            if not path.exists():
                raise ModelError(f"{model}: no such model tree or config file")
            loaded.append(probe_tree(str(path), entry) if path.is_dir() else from_config(path))
        return loaded[0]

    return model_of


def _figures(cluster: Cluster, dtype: str) -> str:
    keys = (f"peak_tflops_{dtype}", "hbm_GBps", "domain_GBps", "scale_out_GBps")
    return ", ".join(f"{k} = {f.value:g} ({f.flag})" for k in keys if (f := cluster.figure(k)).value is not None)


def _check_layout(run: MeasuredRun, model: ModelShape, cluster: Cluster, base: Assumptions, dtype: str) -> None:
    job = Job(model, run.global_batch, run.seq, run.dtype or dtype, base)
    problems = [p for p in layout_problems(job, cluster.with_devices(run.layout.world), run.layout)
                if not p.startswith("memory:")]  # it ran: the memory model's verdict does not matter here
    if problems:
        raise CalibrationError(f"{run.file}: {run.where}: the layout {run.layout.spec()} cannot run {model.name} "
                               f"with global batch {run.global_batch} x seq {run.seq}: {'; '.join(problems)}")


def write(root: Path, calibration: Calibration) -> Path:
    """Merge the calibrated figures into `[tool.migrate.clusters.NAME]` of ROOT/pyproject.toml; an efficiency
    set there by hand or measured is not replaced (refused, naming it)."""
    from .clusters import user_profiles
    from .measure import write_profile

    mine = user_profiles(root).get(calibration.cluster)
    for key in calibration.after:
        fig = mine.figure(key) if mine else None
        if fig is not None and fig.value is not None and fig.flag != "calibrated":
            raise CalibrationError(
                f"{root / 'pyproject.toml'}: [tool.migrate.clusters.{calibration.cluster}] {key} is set "
                f"({fig.value:g}, {fig.flag}); remove it to calibrate it, or keep it and drop --calibrate")
    return write_profile(root, calibration.cluster, _table(calibration), merge=True)
