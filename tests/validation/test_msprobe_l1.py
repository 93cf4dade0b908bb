"""Level L1 (API records only, issue 37): what its records still say about the state msprobe does not record —
parameters as built from a functional's weight argument, an input no recorded op made named by the buffers
and parameters its method reads, a parameter read only by indexing named in the optimizer's decay, and a
collective the port no longer calls named with the module it was called in. Tiny hand-written dumps."""

from __future__ import annotations

from pathlib import Path

import torch

from migrator.validation.parent.interop.msprobe_compare import compare_dumps
from tests.validation.msprobe_kit import tensor_record, write_rank

_SOURCE = '''import torch
from torch import nn


class Attention(nn.Module):
    def __init__(self):
        super().__init__()
        self.table = nn.Parameter(torch.zeros(9, 2))
        self.register_buffer("index", torch.arange(16))
        self.out_proj = nn.Linear(4, 4)

    def forward(self, x):
        bias = self.table[self.index].sum()
        h = x + bias
        return self.out_proj(h)

    def plain(self, x):
        return x * 2
'''


def _t(t: torch.Tensor, grad: bool = False) -> dict:
    return tensor_record(t, requires_grad=grad)


def _write(root: Path, records: dict, stack: dict, construct: dict | None = None) -> Path:
    write_rank(root / "step0" / "rank0", records, construct, stack, level="L1")
    return root


def _linear(x: torch.Tensor, weight: torch.Tensor) -> dict:
    return {"input_args": [_t(x, True), _t(weight, True)], "input_kwargs": {}, "output": [_t(x @ weight.T, True)]}


def _model_dump(root: Path, source: Path, *, weight_top: float = 1.0, bias: float = 0.5, line: int = 14,
                construct: dict | None = None) -> Path:
    """`h = x + bias` (the bias made by indexing, not recorded) then `self.out_proj(h)`."""
    x = torch.linspace(-1, 1, 8).reshape(2, 4)
    weight = torch.linspace(-weight_top, weight_top, 16).reshape(4, 4)
    records = {"Tensor.__add__.0.forward": {"input_args": [_t(x, True), _t(torch.full((2, 4), bias), True)],
                                            "input_kwargs": {}, "output": [_t(x + bias, True)]},
               "Functional.linear.0.forward": _linear(x + bias, weight)}
    stack = {"0": [["Tensor.__add__.0.forward"], [f"File {source}, line {line}, in forward, \n h = x + bias"]],
             "1": [["Functional.linear.0.forward"], [f"File {source}, line 15, in forward, \n return self.out_proj(h)"]]}
    return _write(root, records, stack, construct)


def test_a_weight_argument_that_differs_before_any_update_is_a_parameter_as_built(tmp_path):
    source = tmp_path / "model.py"
    source.write_text(_SOURCE)
    golden = _model_dump(tmp_path / "g", source)
    result = compare_dumps(str(_model_dump(tmp_path / "t", source, weight_top=2.0)), str(golden))
    assert result.exit_code == 1
    assert len(result.built_differently) == 1
    assert result.built_differently[0].startswith("out_proj.weight: Norm ")  # by the attribute the line calls
    assert result.built_differently[0].endswith("(2x)")
    assert result.unrecorded == ""  # the differing input is a weight: no unrecorded op made it

    scoped = {"Functional.linear.0.forward": "Module.attn.out_proj.RowParallelLinear.forward.0"}
    named = compare_dumps(str(_model_dump(tmp_path / "ts", source, weight_top=2.0, construct=scoped)),
                          str(_model_dump(tmp_path / "gs", source, construct=scoped)))
    assert named.built_differently[0].startswith("attn.out_proj (RowParallelLinear).weight: Norm ")

    same_weights = compare_dumps(str(_model_dump(tmp_path / "b", source, bias=0.6)), str(golden))
    assert same_weights.exit_code == 1 and same_weights.built_differently == ()


def test_an_input_no_recorded_op_made_names_what_its_method_reads(tmp_path):
    source = tmp_path / "model.py"
    source.write_text(_SOURCE)
    golden = _model_dump(tmp_path / "g", source)
    result = compare_dumps(str(_model_dump(tmp_path / "t", source, bias=0.6)), str(golden))
    assert result.exit_code == 1 and result.first_divergence.key == "Tensor.__add__.0.forward"
    assert result.unrecorded.startswith("input_args.1 of Tensor.__add__.0.forward (Norm 1.697) is none of the "
                                        "original's tensors and no recorded op made it")
    assert "from what Attention.forward in model.py reads: buffer(s) index; parameter(s) table" in result.unrecorded

    plain = compare_dumps(str(_model_dump(tmp_path / "p", source, bias=0.6, line=18)),  # a method reading no state
                          str(_model_dump(tmp_path / "gp", source, line=18)))
    assert plain.exit_code == 1 and plain.unrecorded == ""


def _optimizer_dump(root: Path, source: Path, decay: bool) -> Path:
    """A forward through `self.out_proj(h)` and an optimizer step on the indexed `table` ([decay mul_,] addcdiv_)."""
    table, update = torch.linspace(-0.1, 0.1, 18).reshape(9, 2), torch.full((9, 2), 1e-3)
    x = torch.linspace(-1, 1, 8).reshape(2, 4)
    records = {"Functional.linear.0.forward": _linear(x, torch.linspace(-1, 1, 16).reshape(4, 4))}
    p = table
    if decay:
        records["Tensor.mul_.0.forward"] = {"input_args": [_t(p, True), {"type": "float", "value": 0.99995}],
                                            "input_kwargs": {}, "output": [_t(p * 0.99995, True)]}
        p = p * 0.99995
    records["Tensor.addcdiv_.0.forward"] = {"input_args": [_t(p, True), _t(update), _t(torch.ones(9, 2))],
                                            "input_kwargs": {"value": {"type": "float", "value": -1.0}},
                                            "output": [_t(p + update, True)]}
    optimizer = [k for k in records if not k.startswith("Functional.")]
    stack = {"0": [["Functional.linear.0.forward"], [f"File {source}, line 15, in forward, \n return self.out_proj(h)"]],
             "1": [optimizer, ["File /venv/site-packages/torch/optim/adamw.py, line 210, in step, ...",
                               "File /work/train.py, line 12, in train_step, optimizer.step()"]]}
    return _write(root, records, stack)


def test_a_decayed_parameter_no_recorded_op_reads_is_named_from_the_source(tmp_path):
    source = tmp_path / "model.py"
    source.write_text(_SOURCE)
    result = compare_dumps(str(_optimizer_dump(tmp_path / "t", source, True)),
                           str(_optimizer_dump(tmp_path / "g", source, False)))
    first = result.first_divergence
    assert result.exit_code == 1 and first.key == "Tensor.mul_.0.forward" and first.scope == "optimizer"
    assert first.argument_diffs[0].startswith("weight_decay: the port's optimizer decays table (an nn.Parameter of "
                                              "Attention in model.py that no recorded op's line reads)")

    source.write_text(_SOURCE.replace("nn.Parameter(torch.zeros(9, 2))", "torch.zeros(9, 2)"))  # no parameter unread
    unnamed = compare_dumps(str(_optimizer_dump(tmp_path / "t2", source, True)),
                            str(_optimizer_dump(tmp_path / "g2", source, False)))
    assert "decays a parameter (mul_" in unnamed.first_divergence.argument_diffs[0]


def test_a_collective_the_port_no_longer_calls_is_named_with_its_module(tmp_path):
    def run(reduced: bool) -> Path:
        grad = torch.full((2, 4), 2.0 if reduced else 1.0)
        records = {}
        if reduced:
            records["Distributed.all_reduce.0.forward"] = {"input_args": [_t(torch.ones(2, 4))], "input_kwargs": {},
                                                           "output": [_t(grad)]}
        records["Tensor.__add__.0.backward"] = {"input": [_t(grad)], "output": [_t(grad)]}
        scopes = {"Distributed.all_reduce.0.forward": "Module.up.ColumnParallelLinear.backward.0"}
        return _write(tmp_path / str(reduced), records, {}, scopes)

    result = compare_dumps(str(run(False)), str(run(True)))
    assert result.first_divergence.key == "Tensor.__add__.0.backward"
    assert result.lost_collectives == ("Distributed.all_reduce.0.forward (in the backward of up (ColumnParallelLinear))",)
