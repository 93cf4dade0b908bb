"""Per-tensor verdicts against the numerics.md §3.3 thresholds, and localisation (parent side).

Inputs are four recorded runs of one step: the *golden* (the original in fp32, G), the *reference*
(the original in its bf16 policy, R), *target_fp32* (the migrated program in fp32, T32) and
*target_bf16* (the migrated program in its bf16 policy, T16); the reference and target_fp32 may be
absent. The checks are :mod:`.graders` per category of tensor, their bounds :mod:`.thresholds`.
Tensors are matched by their class-free match key (see :mod:`.recorder`). For every tensor:

* fp32 logic check: ``rel_l2(T32, G)`` ≤ 1e-5 pass, ≤ 1e-4 warn, else fail (×10 across device
  types); integer tensors (routing indices, counts) must be equal;
* bf16 tolerance: ``ratio = rel_l2(T16, G) / max(rel_l2(R, G), 2e-4)``; activations and
  activation grads pass ≤ 1.5, warn ≤ 2, fail > 2; parameter grads pass ≤ 3, warn ≤ 5, fail > 5;
  parameter grads also fail when ``|‖T‖/‖R‖ − 1| > 0.1``; activations warn when the error
  balance exceeds 0.05 — measured against the golden, warning where ``EB(T, G) > max(0.05,
  2·EB(R, G))``, on tensors of ≥ 65536 elements. Deviation from numerics.md (EB(T, R) > 0.05 on
  every activation), measured on samples/gpt: with 4096-element activations whose bf16 errors
  are correlated (one rounding spreads over a row), EB(T, G) reached 0.126 and EB(R, G) 0.110 on
  correct migrations, so EB is sampling noise there; EB(T, R) is still reported as a column;
* R's error is floored by the original's stochastically rounded runs (``reference_noise``,
  :class:`~.thresholds.ReferenceNoise`): the denominator is the largest of the samples of R's error;
* without R: the absolute bounds rel_l2(T16, G) ≤ 0.02 (activations) / 0.1 (grads) — and the
  result says so;
* NaN/Inf in T where G has none fails, naming the first such tensor;
* report-only msprobe columns against R (cosine fp64, max_abs, max_rel, one-thousandth ratio).

Localisation (the first failing tensor, the worst rows, the counts) is :mod:`.localisation`.
Runs are read from their ``dump.json`` events (:class:`~..dumps.DumpEvent`).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ... import metrics as M
from ...dumps import DumpEvent, migrate_section, read_events
from ...verdict import Verdict, worst
from .graders import Check, Graded, Tensors, grade_bf16, grade_exact, grade_fp32
from .thresholds import Bounds, Thresholds

if TYPE_CHECKING:
    import torch

    from migrator.ground.jsonfile import JsonObject

__all__ = ["CATEGORY", "ORDER", "Check", "Comparison", "Run", "TensorVerdict", "Thresholds", "compare_optimizer",
           "compare_runs"]

# a recorded event's kind -> the category it is judged and reported in
CATEGORY = {"forward_input": "forward", "forward_output": "forward", "backward": "backward",
            "param_grad": "param_grad", "loss": "loss", "api": "routing", "optimizer": "optimizer",
            "training": "training"}
# the order categories are localised in (forward tensors first, then the loss, then backward)
ORDER = {"forward": 0, "routing": 0, "loss": 1, "backward": 2, "param_grad": 3, "optimizer": 4, "training": 5}
DEFAULT_THRESHOLDS = Thresholds()
CATEGORY_STRIDE = 1_000_000  # a verdict's order: its category's ORDER x this + its event's place in the run


@dataclass(frozen=True)
class TensorVerdict:
    name: str          # the tensor's msprobe-style name in the run under test
    match: str
    category: str
    scope: str | None
    scope_cls: str | None
    order: int
    status: Verdict
    checks: tuple[Check, ...]
    columns: dict[str, float] = field(default_factory=dict)
    label: str = ""     # e.g. "step0" or "rank1/step0"
    # the tensor in the run under test and in the original run the columns compare against (R, else G):
    # name, dtype, shape, norm for the msprobe-style CSV; None on the side that lacks it
    npu: DumpEvent | None = None
    bench: DumpEvent | None = None
    note: str = ""  # why a tensor is unmatched

    def check(self, metric: str) -> Check | None:
        for c in self.checks:
            if c.metric == metric:
                return c
        return None


@dataclass
class Comparison:
    verdicts: list[TensorVerdict] = field(default_factory=list)
    unmatched: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    nonfinite: str | None = None

    def extend(self, other: Comparison) -> None:
        self.verdicts.extend(other.verdicts)
        self.unmatched.extend(other.unmatched)
        for n in other.notes:
            if n not in self.notes:
                self.notes.append(n)
        if self.nonfinite is None:
            self.nonfinite = other.nonfinite

    @property
    def status(self) -> Verdict:
        return worst(v.status for v in self.verdicts)


class Run:
    """One recorded run: events in order and tensors, indexed by match key."""

    def __init__(self, doc: JsonObject, tensors: Mapping[str, torch.Tensor], where: str = "dump.json") -> None:
        self.doc = doc
        self.tensors = tensors
        self.events: list[DumpEvent] = read_events(doc, where)
        self.by_match: dict[str, DumpEvent] = {}
        for e in self.events:
            self.by_match.setdefault(e.match, e)
        self.classes = {e.module: e.cls for e in self.events if e.kind.startswith("forward")}

    @classmethod
    def load(cls, run_dir: str | None) -> Run | None:
        if not run_dir:
            return None
        import os

        from ...dumps import DUMP_FILE, load_dump

        return cls(*load_dump(run_dir), where=os.path.join(run_dir, DUMP_FILE))

    def tensor(self, match: str) -> Any:
        e = self.by_match.get(match)
        if e is None or e.missing or e.stats_only:
            return None
        return self.tensors.get(e.name)

    @property
    def loss(self) -> float | None:
        loss = migrate_section(self.doc).get("loss")
        return loss if isinstance(loss, (int, float)) else None


def has_nonfinite(t: Any) -> bool:
    """A floating tensor holding NaN or Inf."""
    import torch

    return t.is_floating_point() and not bool(torch.isfinite(t).all())


def _same_shape(t: Any, g: Any) -> Any:
    """``t`` when it has the golden's shape, else None."""
    return t if t is not None and tuple(t.shape) == tuple(g.shape) else None


def verdict_of(event: DumpEvent, category: str, order: int, label: str, status: Verdict, checks: Iterable[Check],
               run: Run, columns: Mapping[str, float] | None = None, *, bench: DumpEvent | None = None,
               original_only: bool = False, note: str = "") -> TensorVerdict:
    """The verdict on ``event`` (its scope's class read from ``run``); ``original_only``: ``event`` is the
    original run's, the run under test has no such tensor."""
    scope = event.scope
    scope_cls = None
    if scope:
        scope_cls = run.classes.get(scope) or (event.cls if scope == event.module else None)
    return TensorVerdict(
        name=event.name, match=event.match, category=category, scope=scope, scope_cls=scope_cls,
        order=ORDER[category] * CATEGORY_STRIDE + order, status=status, checks=tuple(checks),
        columns=dict(columns or {}), label=label, npu=None if original_only else event,
        bench=event if original_only else bench, note=note,
    )


ONLY_IN_ORIGINAL = "only in the original run"


def unmatched_verdict(out: Comparison, event: DumpEvent, category: str, order: int, label: str, why: str, run: Run,
                      gate: bool, bench: DumpEvent | None = None) -> None:
    """A tensor on one side only, or of another shape: listed always, a failure where shapes must agree."""
    out.unmatched.append(f"{label}{event.name} ({why})")
    if gate:
        out.verdicts.append(verdict_of(event, category, order, label, Verdict.FAIL,
                                       [Check("unmatched", 1.0, 0.0, Verdict.FAIL)], run, bench=bench,
                                       original_only=why == ONLY_IN_ORIGINAL, note=why))


def compare_runs(golden: Run, reference: Run | None, target_fp32: Run | None, target_bf16: Run | None, *,
                 label: str = "", th: Thresholds = DEFAULT_THRESHOLDS, cross_device: bool = False,
                 gate_unmatched: bool = False, reference_noise: Sequence[Run] = ()) -> Comparison:
    """Verdicts for every tensor of the run under test (target_bf16, else target_fp32). See the module
    docstring; ``reference_noise``: the original's stochastically rounded bf16 runs (R's noise floor).

    ``gate_unmatched``: both runs are one whole model (S1, script mode), so a tensor present on one
    side only or with another shape fails; across ranks (S2, S3) sharded tensors differ by design
    and are only listed."""
    under_test = target_bf16 or target_fp32
    if under_test is None:
        return Comparison()
    comparer = _Comparer(golden, reference, target_fp32, target_bf16, under_test, label=label, th=th,
                         fp32=th.fp32.for_devices(cross_device), gate_unmatched=gate_unmatched)
    comparer.noise = _same_path(reference, reference_noise, comparer.out, label)
    return comparer.compare()


def _same_path(reference: Run | None, noise: Sequence[Run], out: Comparison, label: str) -> list[Run]:
    """The noise runs whose integer tensors (routing indices, counts) equal R's: a sample that took another
    discrete path measures that path, not rounding."""
    if reference is None or not noise:
        return []
    import torch

    kept = []
    for run in noise:
        exact = [(r, run.tensor(e.match)) for e in reference.events
                 if (r := reference.tensor(e.match)) is not None and not r.is_floating_point()]
        if all(n is not None and tuple(n.shape) == tuple(r.shape) and bool(torch.equal(n, r)) for r, n in exact):
            kept.append(run)
    if len(kept) < len(noise):
        out.notes.append(f"{label}{len(noise) - len(kept)} of {len(noise)} stochastically rounded runs of the original "
                         "took another discrete path (routing, counts): not used as R's noise floor")
    return kept


class _Comparer:
    """One :func:`compare_runs`: walks the run under test, grading each tensor it can pair with the golden's."""

    def __init__(self, golden: Run, reference: Run | None, target_fp32: Run | None, target_bf16: Run | None,
                 under_test: Run, *, label: str, th: Thresholds, fp32: Bounds, gate_unmatched: bool) -> None:
        self.golden, self.reference, self.target_fp32, self.target_bf16 = golden, reference, target_fp32, target_bf16
        self.under_test = under_test
        self.label, self.th, self.fp32, self.gate = label, th, fp32, gate_unmatched
        self.out = Comparison()
        self.noise: list[Run] = []  # the original's stochastically rounded bf16 runs (R's noise floor)
        self.dtype_diffs: list[tuple[bool, str]] = []  # (narrower than the original's, which tensor)
        self.forward_compared = 0
        # decided once every tensor is compared (fused away or unmatched): fused.resolve
        self.one_sided: list[tuple[Any, ...]] = []

    def compare(self) -> Comparison:
        if self.gate:
            seen = {e.match for e in self.under_test.events}
            for order, g_event in enumerate(self.golden.events):
                if g_event.match not in seen and not g_event.missing:
                    self.one_sided.append((g_event, CATEGORY.get(g_event.kind, "forward"), order, self.label,
                                           ONLY_IN_ORIGINAL, self.golden))
        if self.target_bf16 is not None and self.reference is None:
            th = self.th
            self.out.notes.append("no reference run R in the bf16 policy: absolute bounds against the golden "
                                  f"(activations rel_l2 <= {th.activations.absolute}, grads <= {th.gradients.absolute}); "
                                  "these miss LN-eps-sized bugs")
        for order, event in enumerate(self.under_test.events):
            self._event(order, event)
        from .fused import excuse_inner_ops, resolve

        if self.one_sided:
            resolve(self.one_sided, self.out, unmatched_verdict)
        excuse_inner_ops(self.out)
        self._dtype_notes()
        return self.out

    def _event(self, order: int, event: DumpEvent) -> None:
        category = CATEGORY.get(event.kind, "forward")
        g_event = self.golden.by_match.get(event.match)
        if g_event is None:
            if self.gate:
                self.one_sided.append((event, category, order, self.label, "not in the golden run", self.under_test))
            else:
                unmatched_verdict(self.out, event, category, order, self.label, "not in the golden run",
                                  self.under_test, False)
        elif event.missing or g_event.missing:
            g = self.golden.tensor(event.match)
            if event.missing and g is not None and float(g.double().abs().max()) != 0.0:
                self._add(event, category, order, [Check("grad_missing", 1.0, 0.0, Verdict.FAIL)])
        elif event.stats_only or g_event.stats_only:
            self._statistics_only(order, event, g_event, category)
        else:
            self._tensor(order, event, category)

    def _add(self, event: DumpEvent, category: str, order: int, checks: list[Check],
             columns: Mapping[str, float] | None = None) -> None:
        bench = (self.reference.by_match.get(event.match) if self.reference else None) \
            or self.golden.by_match.get(event.match)
        self.out.verdicts.append(verdict_of(event, category, order, self.label, worst(c.status for c in checks),
                                            checks, self.under_test, columns, bench=bench))

    def _statistics_only(self, order: int, event: DumpEvent, g_event: DumpEvent, category: str) -> None:
        """Beyond --max-dump-mb only statistics exist: |‖T32‖ - ‖G‖| / ‖G‖ (a lower bound of rel_l2)."""
        t32_event = self.target_fp32.by_match.get(event.match) if self.target_fp32 is not None else None
        t_norm = t32_event.norm if t32_event is not None else None
        g_norm = g_event.norm
        if t_norm is None or g_norm is None or tuple(event.shape or ()) != tuple(g_event.shape or ()):
            self.out.unmatched.append(f"{self.label}{event.name} (statistics only)")
            return
        e = abs(t_norm - g_norm) / g_norm if g_norm else (0.0 if t_norm == 0 else float("inf"))
        self._add(event, category, order, [Check("norm_rel_fp32", e, self.fp32.warn_at, self.fp32.grade(e))])

    def _tensor(self, order: int, event: DumpEvent, category: str) -> None:
        match = event.match
        g, t = self.golden.tensor(match), self.under_test.tensor(match)
        if g is None or t is None:
            self.out.unmatched.append(f"{self.label}{event.name} (no tensor data)")
            return
        if tuple(g.shape) != tuple(t.shape):
            unmatched_verdict(self.out, event, category, order, self.label,
                              f"shape {tuple(t.shape)} vs golden {tuple(g.shape)}", self.under_test, self.gate,
                              self.golden.by_match.get(match))
            return
        x = Tensors(golden=g, under_test=t, bf16=self.target_bf16 is self.under_test,
                    target_fp32=_same_shape(self.target_fp32.tensor(match), g) if self.target_fp32 else None,
                    reference=_same_shape(self.reference.tensor(match), g) if self.reference else None,
                    noise_floor=self._noise_floor(match, g, category))
        mask_encoding = x.target_fp32 is not None and str(x.target_fp32.dtype) == "torch.bool"  # a float mask as bool
        if category == "routing" or not g.is_floating_point() or mask_encoding:
            graded = grade_exact(x, self.th.exact)
        else:
            graded = Graded()
            grade_fp32(x, category, self.fp32, graded)
            if x.bf16:
                self._bf16_facts(x, event, category, graded)
                grade_bf16(x, category, self.th, graded)
        self._add(event, category, order, graded.checks, graded.columns)

    def _noise_floor(self, match: str, g: Any, category: str) -> float:
        """The largest of R's error as the stochastically rounded runs measure it (0 without them)."""
        if not self.noise or category in ("loss", "optimizer", "routing") or not g.is_floating_point():
            return 0.0
        errors = [M.rel_l2(n, g) for run in self.noise if (n := _same_shape(run.tensor(match), g)) is not None]
        finite = [e for e in errors if math.isfinite(e)]
        return self.th.noise.stochastic_scale * max(finite) if finite else 0.0

    def _bf16_facts(self, x: Tensors, event: DumpEvent, category: str, graded: Graded) -> None:
        """What the bf16 run shows besides the values: its dtype against the original's, NaN/Inf."""
        t, r = x.under_test, x.reference
        if r is not None and t.dtype != r.dtype and category != "optimizer":
            # narrower than the original or another 16-bit format (fp16 for bf16): a warning; wider: counted
            narrower = _width(t) <= _width(r)
            if narrower:
                graded.checks.append(Check("dtype", 1.0, 0.0, Verdict.WARN))
            self.dtype_diffs.append((narrower, f"{self.label}{event.name} {_dtype(t)} (migrated) vs {_dtype(r)} "
                                               "(original)"))
        if r is not None and category == "forward":
            self.forward_compared += 1
        if has_nonfinite(t) and not has_nonfinite(x.golden) and self.out.nonfinite is None:
            self.out.nonfinite = f"{self.label}{event.name}"

    def _dtype_notes(self) -> None:
        if not self.dtype_diffs:
            return
        diffs = self.dtype_diffs
        wider = [d for narrower, d in diffs if not narrower]
        self.out.notes.append(f"dtypes differ from the original's under the bf16 policy on {len(diffs)} tensor(s) "
                              f"({len(diffs) - len(wider)} narrower, {len(wider)} wider), first: {diffs[0][1]}")
        share = self.th.policy.wider_share
        if self.forward_compared and len(wider) >= share * self.forward_compared:
            # most activations kept a wider dtype: the precision policy itself changed (autocast off?)
            self.out.verdicts.append(TensorVerdict(
                name=wider[0], match="precision-policy", category="forward", scope=None, scope_cls=None,
                order=0, status=Verdict.WARN, label=self.label,
                checks=(Check("dtype_policy", len(wider) / self.forward_compared, share, Verdict.WARN),)))


def _dtype(t: Any) -> str:
    return str(t.dtype).removeprefix("torch.")


def _width(t: Any) -> int:
    return t.element_size() * 8 if t.is_floating_point() else 0


def compare_optimizer(ref: Run, test: Run, *, th: Thresholds = DEFAULT_THRESHOLDS, cross_device: bool = False) -> Comparison:
    """fp32 updates of the two optimizers fed the same fp32 grads (rel_l2 per parameter and step)."""
    out = Comparison()
    bounds = th.fp32.for_devices(cross_device)
    for order, event in enumerate(test.events):
        r = ref.tensor(event.match)
        t = test.tensor(event.match)
        if r is None or t is None or tuple(r.shape) != tuple(t.shape):
            out.unmatched.append(f"{event.name} (no counterpart in the original optimizer run)")
            continue
        e = M.rel_l2(t, r)
        status = bounds.grade(e)
        out.verdicts.append(TensorVerdict(
            name=event.name, match=event.match, category="optimizer", scope="optimizer",
            scope_cls=event.cls, order=ORDER["optimizer"] * CATEGORY_STRIDE + order, status=status,
            checks=(Check("rel_l2_fp32", e, bounds.warn_at, status),), label="optimizer/", npu=event,
            bench=ref.by_match.get(event.match)))
    return out
