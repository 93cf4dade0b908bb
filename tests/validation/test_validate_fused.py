"""A verdict is about the migration only (issue 24 item 2, unit level): a tensor on one side only inside a
module whose outputs match is a note ("fused away"), never a failure; one-sided parameter grads, and
one-sided tensors inside a module whose outputs differ, still fail."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from migrator.validation.parent.comparison.compare import Run, compare_runs  # noqa: E402

G0 = torch.randn(256, generator=torch.Generator().manual_seed(3))


def _run(tensors: dict) -> Run:
    events, named = [], {}
    for match, value in tensors.items():
        kind = "param_grad" if match.endswith(".grad") else "forward_output"
        module = match.split(".forward")[0].removesuffix(".weight.grad")
        name = f"Module.{module}.X.{match}"
        events.append({"name": name, "match": match, "kind": kind, "module": module, "cls": "X", "scope": module,
                       "shape": list(value.shape), "dtype": str(value.dtype), "stats_only": False})
        named[name] = value
    return Run({"migrate": {"events": events}}, named)


MLP, ACT = "blocks.0.mlp.forward.0.output.0", "blocks.0.mlp.act_fn.forward.0.output.0"


def test_a_module_fused_away_inside_a_matching_module_is_a_note():
    G = _run({ACT: G0 * 2, MLP: G0})
    T = _run({MLP: G0.clone()})  # act_fn fused into npu_swiglu: no record of it on the migrated side
    out = compare_runs(G, None, T, None, gate_unmatched=True)
    assert out.status == "pass" and not out.unmatched, [(v.match, v.status) for v in out.verdicts]
    assert any("fused away: blocks.0.mlp.act_fn inside blocks.0.mlp" in n for n in out.notes), out.notes


def test_a_one_sided_tensor_inside_a_module_whose_outputs_differ_still_fails():
    G = _run({ACT: G0 * 2, MLP: G0})
    T = _run({MLP: G0 * 1.1})
    out = compare_runs(G, None, T, None, gate_unmatched=True)
    statuses = {v.match: (v.status, v.checks[0].metric) for v in out.verdicts}
    assert statuses[ACT] == ("fail", "unmatched") and statuses[MLP][0] == "fail"
    assert not any("fused away" in n for n in out.notes)


@pytest.mark.parametrize("extra", ["blocks.0.mlp.act_fn.weight.grad", "extra.forward.0.output.0"])
def test_one_sided_grads_and_tensors_with_no_matching_enclosing_module_fail(extra):
    G = _run({MLP: G0, extra: G0})
    out = compare_runs(G, None, _run({MLP: G0.clone()}), None, gate_unmatched=True)
    assert {v.match: v.status for v in out.verdicts}[extra] == "fail" and out.unmatched
