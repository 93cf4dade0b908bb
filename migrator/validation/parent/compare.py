"""Per-tensor verdicts against the numerics.md §3.3 thresholds, and localisation (parent side).

Inputs are four recorded runs of one step: G (fp32 golden), R (reference in the bf16 policy),
T32 (run under test in fp32) and T16 (run under test in the bf16 policy); R, T32 may be absent.
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
* without R: the absolute bounds rel_l2(T16, G) ≤ 0.02 (activations) / 0.1 (grads) — and the
  result says so;
* NaN/Inf in T where G has none fails, naming the first such tensor;
* report-only msprobe columns against R (cosine fp64, max_abs, max_rel, one-thousandth ratio).

Localisation (the first failing tensor, the worst rows, the counts) is :mod:`.localisation`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from .. import metrics as M

PASS, WARN, FAIL = "pass", "warn", "fail"
_RANK = {PASS: 0, WARN: 1, FAIL: 2}

CATEGORY = {"forward_input": "forward", "forward_output": "forward", "backward": "backward",
            "param_grad": "param_grad", "loss": "loss", "api": "routing", "optimizer": "optimizer",
            "training": "training"}
_ORDER = {"forward": 0, "routing": 0, "loss": 1, "backward": 2, "param_grad": 3, "optimizer": 4, "training": 5}


def worst_status(statuses) -> str:
    out = PASS
    for s in statuses:
        if _RANK.get(s, 0) > _RANK[out]:
            out = s
    return out


@dataclass(frozen=True)
class Thresholds:
    """numerics.md §3.3 defaults."""

    fp32_pass: float = 1e-5
    fp32_warn: float = 1e-4
    cross_device_factor: float = 10.0
    act_pass: float = 1.5
    act_warn: float = 2.0
    grad_pass: float = 3.0
    grad_warn: float = 5.0
    grad_norm_fail: float = 0.1
    loss_rtol: float = 2.0 ** -8
    eb_warn: float = 0.05
    eb_min_numel: int = 65536
    eb_report_numel: int = 4096
    abs_act: float = 0.02
    abs_grad: float = 0.1
    routing_warn: float = 0.01
    policy_share: float = 0.5   # wider dtypes on this share of activations: the policy changed


@dataclass(frozen=True)
class Check:
    metric: str
    value: float
    threshold: float
    status: str


@dataclass(frozen=True)
class TensorVerdict:
    name: str          # the tensor's msprobe-style name in the run under test
    match: str
    category: str
    scope: str | None
    scope_cls: str | None
    order: int
    status: str
    checks: tuple[Check, ...]
    columns: dict[str, float] = field(default_factory=dict)
    label: str = ""     # e.g. "step0" or "rank1/step0"

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
    def status(self) -> str:
        return worst_status(v.status for v in self.verdicts)


class Run:
    """One recorded run: events in order and tensors, indexed by match key."""

    def __init__(self, doc: dict[str, Any], tensors: dict[str, Any]) -> None:
        self.doc = doc
        self.tensors = tensors
        self.events = doc.get("migrate", {}).get("events", [])
        self.by_match: dict[str, dict[str, Any]] = {}
        for e in self.events:
            self.by_match.setdefault(e["match"], e)
        self.classes = {e["module"]: e["cls"] for e in self.events if e["kind"].startswith("forward")}

    @classmethod
    def load(cls, run_dir: str | None) -> Run | None:
        if not run_dir:
            return None
        from ..dumps import load_dump

        return cls(*load_dump(run_dir))

    def tensor(self, match: str):
        e = self.by_match.get(match)
        if e is None or e.get("missing") or e.get("stats_only"):
            return None
        return self.tensors.get(e["name"])

    @property
    def loss(self) -> float | None:
        return self.doc.get("migrate", {}).get("loss")


def _grade(value: float, pass_at: float, warn_at: float) -> str:
    if math.isnan(value):
        return FAIL
    if value <= pass_at:
        return PASS
    if value <= warn_at:
        return WARN
    return FAIL


def _has_nonfinite(t) -> bool:
    import torch

    return t.is_floating_point() and not bool(torch.isfinite(t).all())


def _unmatched_verdict(out: Comparison, event, category, order, label, why: str, run: Run, gate: bool) -> None:
    """A tensor on one side only, or of another shape: listed always, a failure where shapes must agree."""
    out.unmatched.append(f"{label}{event['name']} ({why})")
    if gate:
        out.verdicts.append(_verdict(event, category, order, label, FAIL, [Check("unmatched", 1.0, 0.0, FAIL)], run))


def compare_runs(G: Run, R: Run | None, T32: Run | None, T16: Run | None, *, label: str = "",
                 th: Thresholds = Thresholds(), cross_device: bool = False,
                 gate_unmatched: bool = False) -> Comparison:
    """Verdicts for every tensor of the run under test (T16, else T32). See the module docstring.

    ``gate_unmatched``: both runs are one whole model (S1, script mode), so a tensor present on one
    side only or with another shape fails; across ranks (S2, S3) sharded tensors differ by design
    and are only listed."""
    out = Comparison()
    under_test = T16 or T32
    if under_test is None:
        return out
    dtype_diffs: list[tuple[bool, str]] = []
    forward_compared = 0
    one_sided: list[tuple[Any, ...]] = []  # decided once every tensor is compared (fused away or unmatched)
    if gate_unmatched:
        seen = {e["match"] for e in under_test.events}
        for order, g_event in enumerate(G.events):
            if g_event["match"] not in seen and not g_event.get("missing"):
                one_sided.append((g_event, CATEGORY.get(g_event["kind"], "forward"), order, label,
                                  "only in the original run", G))
    f32_pass = th.fp32_pass * (th.cross_device_factor if cross_device else 1.0)
    f32_warn = th.fp32_warn * (th.cross_device_factor if cross_device else 1.0)
    if T16 is not None and R is None:
        out.notes.append("no reference run R in the bf16 policy: absolute bounds against the golden "
                         f"(activations rel_l2 <= {th.abs_act}, grads <= {th.abs_grad}); these miss LN-eps-sized bugs")
    for order, event in enumerate(under_test.events):
        match, category = event["match"], CATEGORY.get(event["kind"], "forward")
        g_event = G.by_match.get(match)
        if g_event is None:
            if gate_unmatched:
                one_sided.append((event, category, order, label, "not in the golden run", under_test))
            else:
                _unmatched_verdict(out, event, category, order, label, "not in the golden run", under_test, False)
            continue
        if event.get("missing") or g_event.get("missing"):
            g = G.tensor(match)
            if event.get("missing") and g is not None and float(g.double().abs().max()) != 0.0:
                out.verdicts.append(_verdict(event, category, order, label, FAIL,
                                             [Check("grad_missing", 1.0, 0.0, FAIL)], under_test))
            continue
        if event.get("stats_only") or g_event.get("stats_only"):
            # beyond --max-dump-mb only statistics exist: |‖T‖ - ‖G‖| / ‖G‖ (a lower bound of rel_l2)
            t32_event = T32.by_match.get(match) if T32 is not None else None
            t_norm = (t32_event or {}).get("norm")
            g_norm = g_event.get("norm")
            if t_norm is None or g_norm is None or tuple(event.get("shape") or ()) != tuple(g_event.get("shape") or ()):
                out.unmatched.append(f"{label}{event['name']} (statistics only)")
                continue
            e = abs(t_norm - g_norm) / g_norm if g_norm else (0.0 if t_norm == 0 else math.inf)
            check = Check("norm_rel_fp32", e, f32_warn, _grade(e, f32_pass, f32_warn))
            out.verdicts.append(_verdict(event, category, order, label, check.status, [check], under_test))
            continue
        g = G.tensor(match)
        t = under_test.tensor(match)
        if g is None or t is None:
            out.unmatched.append(f"{label}{event['name']} (no tensor data)")
            continue
        if tuple(g.shape) != tuple(t.shape):
            _unmatched_verdict(out, event, category, order, label, f"shape {tuple(t.shape)} vs golden {tuple(g.shape)}",
                               under_test, gate_unmatched)
            continue
        checks: list[Check] = []
        columns: dict[str, float] = {}
        t32 = T32.tensor(match) if T32 is not None else None
        if t32 is not None and tuple(t32.shape) != tuple(g.shape):
            t32 = None
        r = R.tensor(match) if R is not None else None
        if r is not None and tuple(r.shape) != tuple(g.shape):
            r = None

        mask_encoding = t32 is not None and str(t32.dtype) == "torch.bool"  # a float mask re-encoded as bool
        if category == "routing" or not g.is_floating_point() or mask_encoding:
            if t32 is not None:
                mis = M.mismatch_fraction(t32, g)
                checks.append(Check("mismatch_fp32", mis, 0.0, PASS if mis == 0.0 else FAIL))
            if T16 is not None and t is not None and T16 is under_test:
                mis_t = M.mismatch_fraction(t, g)
                mis_r = M.mismatch_fraction(r, g) if r is not None else 0.0
                limit = max(2 * mis_r, th.routing_warn)
                checks.append(Check("mismatch_bf16", mis_t, limit, PASS if mis_t <= limit else WARN))
            status = worst_status(c.status for c in checks)
            out.verdicts.append(_verdict(event, category, order, label, status, checks, under_test))
            continue

        if t32 is not None:
            e32 = M.rel_l2(t32, g)
            checks.append(Check("rel_l2_fp32", e32, f32_warn, _grade(e32, f32_pass, f32_warn)))
            if category == "param_grad":
                columns["norm_ratio_fp32"] = M.norm_ratio(t32, g)
        if T16 is not None and T16 is under_test:
            if r is not None and t.dtype != r.dtype and category != "optimizer":
                # narrower than the original or another 16-bit format (fp16 for bf16): a warning;
                # wider: counted (see below)
                narrower = _width(t) <= _width(r)
                if narrower:
                    checks.append(Check("dtype", 1.0, 0.0, WARN))
                dtype_diffs.append((narrower, f"{label}{event['name']} {_dtype(t)} (migrated) vs {_dtype(r)} (original)"))
            if r is not None and category == "forward":
                forward_compared += 1
            if _has_nonfinite(t) and not _has_nonfinite(g) and out.nonfinite is None:
                out.nonfinite = f"{label}{event['name']}"
            e_t = M.rel_l2(t, g)
            if category == "loss":
                ref = r if r is not None else g
                rel = abs(float(t.double()) - float(ref.double())) / max(abs(float(ref.double())), 1e-30)
                checks.append(Check("loss_rel", rel, th.loss_rtol, PASS if rel <= th.loss_rtol else FAIL))
            elif category == "optimizer":
                pass
            elif r is not None:
                e_r = M.rel_l2(r, g)
                ratio = M.ratio(e_t, e_r)
                if category == "param_grad":
                    checks.append(Check("ratio", ratio, th.grad_warn, _grade(ratio, th.grad_pass, th.grad_warn)))
                    nr = abs(M.norm_ratio(t, r) - 1.0)
                    checks.append(Check("grad_norm", nr, th.grad_norm_fail, PASS if nr <= th.grad_norm_fail else FAIL))
                else:
                    checks.append(Check("ratio", ratio, th.act_warn, _grade(ratio, th.act_pass, th.act_warn)))
                if category == "forward" and t.numel() >= th.eb_report_numel:
                    columns["error_balance_vs_ref"] = M.error_balance(t, r)
                if category == "forward" and t.numel() >= th.eb_min_numel:
                    eb_t, eb_r = M.error_balance(t, g), M.error_balance(r, g)
                    limit = max(th.eb_warn, 2.0 * eb_r)
                    checks.append(Check("error_balance", eb_t, limit, PASS if eb_t <= limit else WARN))
                columns.update(M.report_columns(t, r))
                columns.update(rel_l2_vs_golden=e_t, rel_l2_ref_vs_golden=e_r)
            else:
                bound = th.abs_grad if category in ("param_grad", "backward") else th.abs_act
                checks.append(Check("rel_l2_abs", e_t, bound, PASS if e_t <= bound else FAIL))
                columns.update(M.report_columns(t, g))
                columns.update(rel_l2_vs_golden=e_t)
        elif T32 is under_test and category == "optimizer":
            pass
        status = worst_status(c.status for c in checks)
        out.verdicts.append(_verdict(event, category, order, label, status, checks, under_test, columns))
    if one_sided:
        from .fused import resolve

        resolve(one_sided, out, _unmatched_verdict)
    if dtype_diffs:
        wider = [d for narrower, d in dtype_diffs if not narrower]
        out.notes.append(f"dtypes differ from the original's under the bf16 policy on {len(dtype_diffs)} tensor(s) "
                         f"({len(dtype_diffs) - len(wider)} narrower, {len(wider)} wider), first: {dtype_diffs[0][1]}")
        if forward_compared and len(wider) >= th.policy_share * forward_compared:
            # most activations kept a wider dtype: the precision policy itself changed (autocast off?)
            out.verdicts.append(TensorVerdict(
                name=wider[0], match="precision-policy", category="forward", scope=None, scope_cls=None,
                order=0, status=WARN, label=label,
                checks=(Check("dtype_policy", len(wider) / forward_compared, th.policy_share, WARN),)))
    return out


def _dtype(t) -> str:
    return str(t.dtype).removeprefix("torch.")


def _width(t) -> int:
    return t.element_size() * 8 if t.is_floating_point() else 0


def _verdict(event, category, order, label, status, checks, run: Run, columns=None) -> TensorVerdict:
    scope = event.get("scope")
    return TensorVerdict(
        name=event["name"], match=event["match"], category=category, scope=scope,
        scope_cls=(run.classes.get(scope) or (event.get("cls") if scope == event.get("module") else None)) if scope else None,
        order=_ORDER[category] * 1_000_000 + order, status=status, checks=tuple(checks),
        columns=dict(columns or {}), label=label,
    )


def compare_optimizer(ref: Run, test: Run, *, th: Thresholds = Thresholds(), cross_device: bool = False) -> Comparison:
    """fp32 updates of the two optimizers fed the same fp32 grads (rel_l2 per parameter and step)."""
    out = Comparison()
    f32_pass = th.fp32_pass * (th.cross_device_factor if cross_device else 1.0)
    f32_warn = th.fp32_warn * (th.cross_device_factor if cross_device else 1.0)
    for order, event in enumerate(test.events):
        r = ref.tensor(event["match"])
        t = test.tensor(event["match"])
        if r is None or t is None or tuple(r.shape) != tuple(t.shape):
            out.unmatched.append(f"{event['name']} (no counterpart in the original optimizer run)")
            continue
        e = M.rel_l2(t, r)
        status = _grade(e, f32_pass, f32_warn)
        out.verdicts.append(TensorVerdict(
            name=event["name"], match=event["match"], category="optimizer", scope="optimizer",
            scope_cls=event.get("cls"), order=_ORDER["optimizer"] * 1_000_000 + order, status=status,
            checks=(Check("rel_l2_fp32", e, f32_warn, status),), label="optimizer/"))
    return out
