"""One cluster's part of a plan: its ranked layouts, fault plan, per-stage layouts and S0 check (data only)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .clusters import Cluster
from .cost import Layout
from .estimate import Estimate
from .fault import FaultPlan


@dataclass(frozen=True)
class ClusterPlan:
    cluster: Cluster
    world: int
    considered: int
    top: tuple[Estimate, ...]
    why: tuple[str, ...]
    fault: FaultPlan | None
    stages: dict[str, Layout] = field(default_factory=dict)
    s0: dict[str, Any] = field(default_factory=dict)
    error: str = ""  # a required figure is missing: this cluster was not planned, the others were
    stage_notes: dict[str, str] = field(default_factory=dict)
    problems: tuple[str, ...] = ()  # a given --layout cannot run here: each names its constraint
    given: bool = False             # top[0] is the --layout given, not a searched one

    def to_json(self) -> dict[str, Any]:
        return {"cluster": self.cluster.to_json(), "world": self.world, "considered": self.considered,
                "error": self.error or None, "problems": list(self.problems), "given_layout": self.given,
                "top": [e.to_json() for e in self.top], "why": list(self.why),
                "fault": self.fault.to_json() if self.fault else None,
                "stages": {k: {"layout": v.label(), "note": self.stage_notes.get(k, "")} for k, v in self.stages.items()},
                "s0": self.s0}
