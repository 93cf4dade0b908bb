"""A graded msprobe record and its tensor slots: the data `msprobe_compare` produces and the modules that
explain a divergence (`msprobe_state`, `msprobe_updates`) read, kept apart so neither imports the other."""

from __future__ import annotations

import math
from dataclasses import dataclass

from ...verdict import Verdict


@dataclass(frozen=True)
class SlotVerdict:
    slot: str
    status: Verdict
    metric: str
    value: float
    threshold: float
    detail: str = ""


@dataclass(frozen=True)
class RecordVerdict:
    label: str                # step/rank
    key: str
    api: str
    direction: str
    status: Verdict
    slots: tuple[SlotVerdict, ...]
    argument_diffs: tuple[str, ...] = ()
    user_line: str = ""
    scope: str = ""                              # the enclosing module: layers.0.mixer.dt_proj (Linear)
    parameters: tuple[tuple[str, str], ...] = ()  # (slot, parameter it is): (input_args.1, dt_proj.weight)

    @property
    def worst(self) -> SlotVerdict | None:
        """The failing slot to name: a module's parameter first (the outputs follow from it), else the largest."""
        failing = [s for s in self.slots if s.status == self.status and s.metric != "argument"]
        failing = [s for s in failing if s.slot.startswith("parameters.")] or failing
        return max(failing, key=lambda s: s.value if not math.isnan(s.value) else math.inf) if failing else None
