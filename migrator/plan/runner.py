"""`migrate plan` end to end: model + clusters -> ranked layouts, fault plan, per-stage layouts (data only)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .assumptions import Assumptions, explain_lines
from .cluster_plan import ClusterPlan
from .clusters import Cluster, Figure, MissingFigure
from .cost import Layout
from .estimate import layout_problems, on_cluster
from .fault import LLAMA3_FAILURES_PER_DEVICE_HOUR, plan_faults
from .model import ModelShape
from .search import Estimate, Job, compare, duration, estimate, search

SCHEMA_VERSION = 1


@dataclass(frozen=True)
class PlanResult:
    model: ModelShape
    global_batch: int
    seq: int
    dtype: str
    assumptions: Assumptions
    clusters: tuple[ClusterPlan, ...]
    explain: tuple[str, ...] = ()   # --explain: every assumption, its value and its source

    @property
    def exit_code(self) -> int:
        """0 every cluster planned, 1 one has no fitting layout (or its S0 check failed), 2 one lacks a
        required figure."""
        if any(c.error for c in self.clusters):
            return 2
        failed = any(c.s0.get("status") in ("fail", "error") for c in self.clusters)
        return 1 if failed or any(not c.top or c.problems for c in self.clusters) else 0

    def to_json(self) -> dict[str, object]:  # the plan JSON (plan.schema.json), for json.dumps
        return {"schema_version": SCHEMA_VERSION, "model": self.model.to_json(), "global_batch": self.global_batch,
                "seq": self.seq, "dtype": self.dtype, "assumptions": self.assumptions.to_json(),
                "clusters": [c.to_json() for c in self.clusters], "explain": list(self.explain),
                "markdown": self.markdown()}

    def markdown(self) -> str:
        from .render import markdown

        return markdown(self)

    def text(self) -> str:
        from .render import text

        return text(self)


def s0_check(layout: Layout, model: ModelShape) -> dict[str, Any]:
    """What `migrate validate` S0 can check of this layout on the fake process group. S0 builds dp x tp,
    puts EP on all of its DP ranks and has no pipeline or context parallelism: it runs at the real world
    size when pp = cp = 1 and EP is absent or equals DP; otherwise on the slice it can represent, which
    the note names."""
    missing = []
    if layout.pp > 1:
        missing.append(f"PP {layout.pp}")
    if layout.cp > 1:
        missing.append(f"CP {layout.cp}")
    if model.moe and layout.ep != layout.dp:
        ep = layout.ep if layout.ep > 1 else max(e for e in range(1, layout.dp + 1)
                                                 if model.experts % e == 0 and layout.dp % e == 0)
        world = layout.tp * ep
        missing.append(f"DP {layout.dp} beyond EP {ep}")
    else:
        world = layout.tp * layout.dp
    note = ("at the real world size" if not missing else
            f"a {world}-rank slice of the {layout.world}-rank layout (S0 does not model {', '.join(missing)})")
    return {"plan_world_size": world, "plan_tp": layout.tp, "note": note,
            "command": f"migrate validate TREE --stages S0 --plan-world-size {world} --plan-tp {layout.tp}"}


def plan_cluster(job: Job, cluster: Cluster, devices: int | None, top: int, failure_rate: float,
                 checkpoint_seconds: float | None) -> ClusterPlan:
    if devices:  # an explicit world size, as asked (fewer only if it cannot divide)
        found = search(job, cluster.with_devices(devices), top=top)
        cluster = cluster.with_devices(devices)
    else:  # the smallest size that fits and splits the global batch (`sizing`)
        from .sizing import candidate_sizes

        found = search(job, cluster, top=top, sizes=candidate_sizes(cluster))
    ranked: list[Estimate] = found["top"]
    stages: dict[str, Layout] = {"1card": Layout(zero=0)}
    notes: dict[str, str] = {}
    fault = None
    s0: dict[str, Any] = {}
    if ranked:
        best = ranked[0]
        one = estimate(job, cluster, Layout(zero=0, recompute="full"))
        if not one.fits:
            notes["1card"] = (f"the full model needs {one.memory['total'] / 1e9:.0f} GB on one card: run a reduced "
                              "configuration (fewer layers) at this stage")
        per_node = _per_node(cluster) or found["world"]
        if _per_node(cluster) is None:
            notes["1machine"] = f"{cluster.name}: devices_per_node is not known, so there is no one-machine stage"
        elif per_node < found["world"]:
            machine = search(job, cluster, world=per_node, top=1)["top"]
            if machine:
                stages["1machine"] = machine[0].layout
            else:
                tp = max(t for t in range(1, per_node + 1) if per_node % t == 0 and best.layout.tp % t == 0)
                stages["1machine"] = Layout(tp=tp, dp=per_node // tp, zero=best.layout.zero,
                                            recompute=best.layout.recompute)
                notes["1machine"] = (f"no layout of the full model fits on {per_node} devices: this is the "
                                     f"supernode plan's TP {tp} on one machine, for a reduced configuration")
        stages["supernode" if found["world"] > per_node else "1machine"] = best.layout
        state = sum(v for k, v in best.memory.items() if k in ("weights", "gradients", "optimizer"))
        fault = plan_faults(best.layout, cluster, state, failure_rate, checkpoint_seconds)
        s0 = s0_check(best.layout, job.model)
    return ClusterPlan(cluster, found["world"], found["considered"], tuple(ranked), tuple(found["why"]), fault,
                       stages, s0, stage_notes=notes)


def evaluate_cluster(job: Job, cluster: Cluster, layout: Layout, devices: int | None, failure_rate: float,
                     checkpoint_seconds: float | None, explain: bool) -> ClusterPlan:
    """A given layout: its breakdown, or the constraints it breaks; with `explain`, the search's pick at the
    same world size and the terms that make it faster."""
    cluster = cluster.with_devices(devices or layout.world)
    problems = layout_problems(job, cluster, layout, devices)
    if problems and not problems[0].startswith("memory:"):
        return ClusterPlan(cluster, layout.world, 1, (), (), None, problems=tuple(problems), given=True)
    est = estimate(job, cluster, layout)
    why = [f"the given layout: {duration(est.step_s)} per step, MFU {est.mfu:.1%}"]
    if explain:
        found = search(job, cluster, world=layout.world, top=1, seeds=(layout,))
        if found["top"]:
            why += compare(job, cluster, found["top"][0], est)
    state = sum(v for k, v in est.memory.items() if k in ("weights", "gradients", "optimizer"))
    fault = plan_faults(layout, cluster, state, failure_rate, checkpoint_seconds)
    return ClusterPlan(cluster, layout.world, 1, (est,), tuple(why), fault, {"supernode": layout},
                       s0_check(layout, job.model), problems=tuple(problems), given=True)


def plan(model: ModelShape, clusters: list[Cluster], *, global_batch: int, seq: int, dtype: str = "bf16",
         devices: int | None = None, top: int = 3, failure_rate: float = LLAMA3_FAILURES_PER_DEVICE_HOUR,
         checkpoint_seconds: float | None = None, assumptions: Assumptions | None = None,
         layout: Layout | None = None, explain: bool = False, strict: bool = False,
         figures: dict[str, Figure] | None = None, assumed: frozenset[str] = frozenset()) -> PlanResult:
    """`figures` (from `--assume KEY=VALUE` on a cluster key) replace each cluster's; `strict` refuses a
    cluster whose plan would read a figure that is neither measured, calibrated nor first-party. A cluster's
    calibrated efficiencies replace the global assumptions for it, except the keys in `assumed` (set by
    --assume)."""
    job = Job(model, global_batch, seq, dtype, assumptions or Assumptions())
    plans = []
    for cluster in clusters:
        cluster = cluster.with_figures(figures) if figures else cluster
        weak = cluster.not_strict(dtype) if strict else []
        if weak:
            plans.append(ClusterPlan(cluster, devices or 0, 0, (), (), None, error=(
                f"--strict: cluster {cluster.name!r} has figures that are neither measured, calibrated nor "
                f"first-party: "
                f"{', '.join(weak)}; set measured values in [tool.migrate.clusters.{cluster.name}] "
                "(e.g. hbm_GBps = {value = 1500, flag = \"measured\", source = \"...\"}) or drop --strict")))
            continue
        try:
            here = on_cluster(job, cluster, assumed)
            if layout is not None:
                plans.append(evaluate_cluster(here, cluster, layout, devices, failure_rate, checkpoint_seconds,
                                              explain))
            else:
                plans.append(plan_cluster(here, cluster, devices, top, failure_rate, checkpoint_seconds))
        except MissingFigure as exc:
            plans.append(ClusterPlan(cluster, devices or 0, 0, (), (), None, error=str(exc)))
    notes = tuple(explain_lines(job.assumptions)) if explain else ()
    return PlanResult(model, global_batch, seq, dtype, job.assumptions, tuple(plans), notes)


def _per_node(cluster: Cluster) -> int | None:
    value = cluster.figure("devices_per_node").value
    return int(value) if value else None


def write_launch(result: PlanResult, out: str | Path, script: str = "train.py") -> tuple[list[Path], list[str]]:
    """Launch scripts per cluster (a folder per cluster when there are several). Returns the files written
    and, for clusters without scripts, why."""
    from .launch import write_launch as write

    written: list[Path] = []
    skipped: list[str] = []
    for cp in result.clusters:
        per_node = _per_node(cp.cluster)
        if not cp.top or per_node is None:
            skipped.append(f"{cp.cluster.name}: no launch scripts (" +
                           ("no plan" if not cp.top else "devices_per_node is not known: set it in "
                            f"[tool.migrate.clusters.{cp.cluster.name}]") + ")")
            continue
        folder = Path(out) / cp.cluster.name if len(result.clusters) > 1 else Path(out)
        written += write(folder, cp.stages, per_node, script, cp.stage_notes)
    return written, skipped
