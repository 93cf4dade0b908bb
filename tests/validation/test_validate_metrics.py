"""Metrics against hand-computed values, and the verdict / localisation rules on synthetic runs."""

from __future__ import annotations

import math

import pytest

torch = pytest.importorskip("torch")

from migrator.validation import metrics as M  # noqa: E402
from migrator.validation.parent.comparison.compare import Run, Thresholds, compare_optimizer, compare_runs  # noqa: E402
from migrator.validation.parent.localisation.first_failure import localise  # noqa: E402
from migrator.validation.records import to_json  # noqa: E402


def t(*values, dtype=torch.float32):
    return torch.tensor(values, dtype=dtype)


# ------------------------------------------------------------------------------ metrics
def test_rel_l2_hand_values():
    assert M.rel_l2(t(1, 2, 2), t(1, 2, 3)) == pytest.approx(1 / math.sqrt(14))
    assert M.rel_l2(t(3, 4), t(3, 4)) == 0.0
    assert M.rel_l2(t(0, 0), t(0, 0)) == 0.0
    assert M.rel_l2(t(1, 0), t(0, 0)) == math.inf


def test_rel_l2_non_finite():
    nan = float("nan")
    assert M.rel_l2(t(1, nan), t(1, 2)) == math.inf
    assert M.rel_l2(t(1, nan), t(1, nan)) == 0.0  # same NaN pattern: no difference
    assert M.rel_l2(t(1, float("inf")), t(1, 2)) == math.inf


def test_ratio_and_floor():
    assert M.ratio(0.01, 0.005) == pytest.approx(2.0)
    assert M.ratio(1e-3, 0.0) == pytest.approx(5.0)  # floor 2e-4
    assert M.ratio(1e-4, 1e-5) == pytest.approx(0.5)
    assert M.ratio(math.inf, 1e-3) == math.inf


def test_cosine_in_fp64():
    assert M.cosine(t(1, 0), t(0, 1)) == 0.0
    assert M.cosine(t(1, 1), t(2, 2)) == pytest.approx(1.0, abs=1e-15)
    assert M.cosine(t(0, 0), t(0, 0)) == 1.0
    x = torch.randn(1_000_000, generator=torch.Generator().manual_seed(0))
    assert M.cosine(x, x.clone()) == pytest.approx(1.0, abs=1e-12)  # fp32 gets ~1e-4 wrong here
    assert M.cosine(t(1, 0), t(-1, 0)) == -1.0


def test_max_abs_and_max_rel_small_value_rule():
    r, x = t(1e-4, 1.0, 2.0), t(2e-4, 1.1, 2.0)
    assert M.max_abs(x, r) == pytest.approx(0.1, rel=1e-5)
    # |r| = 1e-4 <= 2^-10 is a small value: excluded from the relative errors
    assert M.max_rel(x, r) == pytest.approx(0.1, rel=1e-5)
    assert M.mean_rel(x, r) == pytest.approx(0.05, rel=1e-5)
    assert M.max_rel(t(5.0), t(1e-5)) == 0.0


def test_thousandth():
    assert M.thousandth(t(1, 1.0005, 1.002, 1), t(1, 1, 1, 1)) == pytest.approx(0.75)
    assert M.thousandth(t(0, 1e-9), t(0, 0)) == pytest.approx(0.5)  # r == 0: only t == 0 agrees


def test_error_balance_and_norm_ratio():
    assert M.error_balance(t(2, 2, 0, 5), t(1, 1, 1, 5)) == pytest.approx(0.25)
    assert M.error_balance(t(), t()) == 0.0
    assert M.norm_ratio(t(3, 4), t(6, 8)) == pytest.approx(0.5)
    assert M.norm_ratio(t(0), t(0)) == 1.0


def test_mismatch_and_stats():
    assert M.mismatch_fraction(torch.tensor([1, 2, 3, 4]), torch.tensor([1, 2, 0, 4])) == 0.25
    s = M.stats(t(1, -2, 3))
    assert s == {"Max": 3.0, "Min": -2.0, "Mean": pytest.approx(2 / 3), "Norm": pytest.approx(math.sqrt(14))}
    assert M.stats(t())["Max"] is None


# ------------------------------------------------------------------------------ verdicts
def _run(tensors: dict, kinds: dict | None = None, scopes: dict | None = None, loss=None) -> Run:
    """A recorded run from {match: tensor}; kinds default to forward outputs of module 'm<i>'."""
    events, named = [], {}
    for i, (match, value) in enumerate(tensors.items()):
        kind = (kinds or {}).get(match, "forward_output")
        module = match.split(".forward")[0].split(".backward")[0] if ".forward" in match or ".backward" in match else f"m{i}"
        scope = (scopes or {}).get(match, module)
        name = f"Module.{module}.X.{match}"
        events.append({"name": name, "match": match, "kind": kind, "module": module, "cls": "X", "scope": scope,
                       "shape": list(value.shape), "dtype": str(value.dtype), "stats_only": False})
        named[name] = value
    return Run({"migrate": {"events": events, "loss": loss}}, named)


def _noisy(g, rel, seed):
    n = torch.randn(g.shape, generator=torch.Generator().manual_seed(seed))
    return g + n / n.norm() * g.norm() * rel


G0 = torch.randn(4096, generator=torch.Generator().manual_seed(1))


@pytest.mark.parametrize("kind,rel_t,expected", [
    ("forward_output", 1.4e-2, "pass"), ("forward_output", 1.8e-2, "warn"), ("forward_output", 2.5e-2, "fail"),
    ("backward", 2.5e-2, "fail"),
    ("param_grad", 2.9e-2, "pass"), ("param_grad", 4.0e-2, "warn"), ("param_grad", 6.0e-2, "fail"),
])
def test_ratio_thresholds_by_category(kind, rel_t, expected):
    key = "a.forward.0.output.0"
    G = _run({key: G0}, {key: kind})
    R = _run({key: _noisy(G0, 1e-2, 2)}, {key: kind})
    T16 = _run({key: _noisy(G0, rel_t, 3)}, {key: kind})
    T32 = _run({key: G0.clone()}, {key: kind})
    out = compare_runs(G, R, T32, T16)
    (v,) = out.verdicts
    assert v.check("ratio").value == pytest.approx(rel_t / 1e-2, rel=1e-3)
    if kind == "param_grad":
        assert v.check("grad_norm").status == "pass"
    assert v.status == expected


def test_grad_norm_ratio_fails_a_scale_bug_cosine_misses():
    key = "w.grad"
    G = _run({key: G0}, {key: "param_grad"})
    R = _run({key: _noisy(G0, 0.05, 2)}, {key: "param_grad"})  # a noisy reference: ratio alone would pass
    T16 = _run({key: 1.15 * R.tensors["Module.m0.X.w.grad"]}, {key: "param_grad"})
    (v,) = compare_runs(G, R, None, T16).verdicts
    assert v.check("grad_norm").status == "fail"
    assert M.cosine(T16.tensors["Module.m0.X.w.grad"], R.tensors["Module.m0.X.w.grad"]) == pytest.approx(1.0)


@pytest.mark.parametrize("rel,expected,cross", [(5e-6, "pass", False), (5e-5, "warn", False), (1e-3, "fail", False),
                                                (5e-5, "pass", True), (5e-4, "warn", True)])
def test_fp32_logic_thresholds(rel, expected, cross):
    key = "a.forward.0.output.0"
    G = _run({key: G0})
    out = compare_runs(G, None, _run({key: _noisy(G0, rel, 4)}), None, cross_device=cross)
    (v,) = out.verdicts
    assert v.check("rel_l2_fp32").value == pytest.approx(rel, rel=1e-2)
    assert v.status == expected


def test_loss_sanity_check():
    key = "loss"
    kinds = {key: "loss"}
    G, R = _run({key: torch.tensor(4.0)}, kinds), _run({key: torch.tensor(4.001)}, kinds)
    ok = compare_runs(G, R, None, _run({key: torch.tensor(4.002)}, kinds)).verdicts[0]
    bad = compare_runs(G, R, None, _run({key: torch.tensor(4.1)}, kinds)).verdicts[0]
    assert ok.check("loss_rel").status == "pass" and bad.check("loss_rel").status == "fail"


def test_absolute_bounds_without_reference_say_so():
    key = "a.forward.0.output.0"
    G = _run({key: G0})
    good = compare_runs(G, None, None, _run({key: _noisy(G0, 0.01, 5)}))
    bad = compare_runs(G, None, None, _run({key: _noisy(G0, 0.03, 5)}))
    assert good.verdicts[0].status == "pass" and bad.verdicts[0].status == "fail"
    assert bad.verdicts[0].check("rel_l2_abs").threshold == Thresholds().abs_act
    assert any("absolute bounds" in n for n in good.notes)


def test_nan_in_t_names_the_first_tensor():
    a, b = "a.forward.0.output.0", "b.forward.0.output.0"
    G = _run({a: G0, b: G0})
    R = _run({a: _noisy(G0, 1e-2, 1), b: _noisy(G0, 1e-2, 2)})
    bad = G0.clone()
    bad[3] = float("nan")
    out = compare_runs(G, R, None, _run({a: G0.clone(), b: bad}))
    assert out.nonfinite.endswith(b)
    assert out.verdicts[1].status == "fail"


def test_mismatched_shapes_are_unmatched_not_a_crash():
    a = "a.forward.0.output.0"
    out = compare_runs(_run({a: G0}), None, _run({a: G0[:100]}), _run({a: G0[:100]}))
    assert out.verdicts == [] and "shape" in out.unmatched[0]


def test_whole_model_runs_fail_on_a_shape_or_one_sided_tensor():
    """S1 and script mode compare one whole model: an output of another shape (a forward returning
    torch.cat([out, out]) that the loss slices back) or a tensor on one side only is a failure."""
    a, b = "head.forward.0.output.0", "extra.forward.0.output.0"
    G = _run({a: G0, b: G0})
    doubled = torch.cat([G0, G0])
    out = compare_runs(G, None, _run({a: doubled}), _run({a: doubled}), gate_unmatched=True)
    statuses = {v.match: (v.status, v.checks[0].metric) for v in out.verdicts}
    assert statuses == {a: ("fail", "unmatched"), b: ("fail", "unmatched")}
    assert out.status == "fail" and len(out.unmatched) == 2
    assert any("shape" in u for u in out.unmatched) and any("only in the original" in u for u in out.unmatched)
    loc = localise(out.verdicts)
    assert loc is not None and loc.metric == "unmatched"


def test_dtypes_under_the_bf16_policy_narrower_warns_and_a_wider_policy_is_caught():
    """A tensor narrower than the original's (fp16 where it was bf16) warns naming both dtypes; one
    wider tensor is a note (torch's LayerNorm under autocast returns fp32 where apex's returned bf16);
    most activations wider means autocast was dropped on the migrated side: a policy warning."""
    keys = [f"m{i}.forward.0.output.0" for i in range(4)]
    G = _run({k: G0 for k in keys})
    R = _run({k: _noisy(G0, 1e-2, i).to(torch.bfloat16) for i, k in enumerate(keys)})
    fp16 = {k: _noisy(G0, 1e-2, 9).to(torch.bfloat16) for k in keys} | {keys[0]: G0.to(torch.float16)}
    out = compare_runs(G, R, None, _run(fp16))
    assert out.verdicts[0].check("dtype").status == "warn"
    assert any("float16 (migrated) vs bfloat16 (original)" in n for n in out.notes)
    one_wider = {k: _noisy(G0, 1e-2, 9).to(torch.bfloat16) for k in keys} | {keys[0]: G0.clone()}
    out = compare_runs(G, R, None, _run(one_wider))
    assert out.status == "pass" and any("1 wider" in n for n in out.notes)
    no_autocast = compare_runs(G, R, None, _run({k: G0.clone() for k in keys}))
    assert no_autocast.status == "warn"
    assert [c.metric for v in no_autocast.verdicts if v.status == "warn" for c in v.checks] == ["dtype_policy"]
    same = compare_runs(G, R, None, _run({k: _noisy(G0, 1e-2, 2).to(torch.bfloat16) for k in keys}))
    assert not same.notes and all(v.check("dtype") is None for v in same.verdicts)


def test_integer_tensors_compared_exactly():
    key = "api.topk.0.output.1"
    kinds = {key: "api"}
    G = _run({key: torch.tensor([0, 1, 2, 3])}, kinds)
    out = compare_runs(G, None, _run({key: torch.tensor([0, 1, 3, 3])}, kinds), None)
    (v,) = out.verdicts
    assert v.category == "routing" and v.status == "fail" and v.check("mismatch_fp32").value == 0.25


def test_localisation_first_in_forward_order_and_by_scope():
    # input of 'blocks.0.attn.wo' diverges first: it was computed in its enclosing module 'blocks.0.attn'
    a = "blocks.0.attn.wqkv.forward.0.output.0"
    b = "blocks.0.attn.wo.forward.0.input.0"
    c = "blocks.0.attn.wo.forward.0.output.0"
    kinds = {b: "forward_input"}
    scopes = {b: "blocks.0.attn"}
    G = _run({a: G0, b: G0, c: G0}, kinds, scopes)
    T32 = _run({a: G0.clone(), b: _noisy(G0, 0.3, 1), c: _noisy(G0, 0.3, 2)}, kinds, scopes)
    loc = localise(compare_runs(G, None, T32, None).verdicts)
    assert loc.module == "blocks.0.attn" and loc.tensor.endswith(b) and loc.metric == "rel_l2_fp32"


def test_localisation_names_a_uniform_grad_scale_as_the_reduction():
    grads = {f"p{i}.grad": torch.randn(64, generator=torch.Generator().manual_seed(i)) for i in range(4)}
    kinds = {k: "param_grad" for k in grads}
    G = _run(grads, kinds)
    T32 = _run({k: 2 * v for k, v in grads.items()}, kinds)
    loc = localise(compare_runs(G, None, T32, None).verdicts)
    assert "gradient reduction" in loc.module and "scaled by 2" in loc.note


def test_optimizer_updates_compared_in_fp32():
    ref = _run({"optim.step0.w": G0}, {"optim.step0.w": "optimizer"})
    same = compare_optimizer(ref, _run({"optim.step0.w": G0 * (1 + 1e-7)}, {"optim.step0.w": "optimizer"}))
    off = compare_optimizer(ref, _run({"optim.step0.w": G0 * 1.01}, {"optim.step0.w": "optimizer"}))
    assert same.status == "pass" and off.status == "fail"


def _statistics_only(run: Run) -> Run:
    """``run`` as recorded beyond --max-dump-mb: every event statistics only (its norm), no tensor data."""
    events = [dict(to_json(e), stats_only=True, norm=float(run.tensors[e.name].norm())) for e in run.events]
    return Run({"migrate": {"events": events}}, run.tensors)


def test_statistics_only_tensors_compared_by_norm():
    key = "a.forward.0.output.0"
    G, T32 = (_statistics_only(_run({key: value})) for value in (G0, G0 * 1.01))
    (v,) = compare_runs(G, None, T32, None).verdicts
    assert v.check("norm_rel_fp32").value == pytest.approx(0.01, rel=1e-3) and v.status == "fail"


def test_a_batch_that_does_not_split_over_the_ranks_could_not_run():
    """The harness, not the program, cannot split 6 samples over 4 ranks: exit 2 "could not run",
    never "the migrated program failed"."""
    from migrator.validation.child.errors import CannotRun, failure_phase
    from migrator.validation.child.execute import split_batch

    with pytest.raises(CannotRun, match="does not divide over 4 ranks") as info:
        split_batch({"x": torch.zeros(6, 3)}, 4)
    assert failure_phase(info.value) == "harness"
    assert failure_phase(RuntimeError("the program's own bug")) == "run"
    assert [b["x"].shape[0] for b in split_batch({"x": torch.zeros(8, 3)}, 4)] == [2, 2, 2, 2]


@pytest.mark.parametrize("batch", [{"x": torch.zeros(4, 3), "y": torch.zeros(2)}, (torch.zeros(4), torch.tensor(1.0)),
                                   {"n": 3}])
def test_a_batch_without_one_leading_dimension_could_not_run(batch):
    """Tensors of different leading sizes, a 0-d tensor, or no tensor at all: nothing to split on."""
    from migrator.validation.child.errors import CannotRun
    from migrator.validation.child.execute import split_batch

    with pytest.raises(CannotRun, match="do not share one leading batch dimension"):
        split_batch(batch, 2)


def test_nan_in_the_bf16_run_is_named_in_the_summary():
    from migrator.validation.parent.stage_kit import numeric_stage

    a = "a.forward.0.output.0"
    bad = G0.clone()
    bad[0] = float("nan")
    G = _run({a: G0})
    out = compare_runs(G, _run({a: _noisy(G0, 1e-2, 1)}), _run({a: G0.clone()}), _run({a: bad}))
    stage = numeric_stage("S1", out, bench={}, notes=[])
    assert stage.status == "fail" and stage.summary.startswith("NaN/Inf in the migrated bf16 run (first: ")
