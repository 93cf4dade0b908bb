"""Pairing msprobe records by data flow (issue 37 item 5) and naming the first divergence's module and
parameters, on tiny hand-written statistics dumps (msprobe 26's `dump.json` / `construct.json` layout)."""

from __future__ import annotations

import json
from pathlib import Path

from migrator.validation.parent.interop.msprobe_compare import compare_dumps


def _tensor(shape: list[int], norm: float, top: float = 1.0) -> dict:
    return {"type": "torch.Tensor", "dtype": "torch.float32", "shape": shape, "Max": top, "Min": -top,
            "Mean": 0.0, "Norm": norm, "requires_grad": True}


def _dump(root: Path, records: list[tuple[str, dict]], construct: dict[str, str | None] | None = None) -> Path:
    folder = root / "step0" / "rank0"
    folder.mkdir(parents=True)
    doc = {"task": "statistics", "level": "mix", "framework": "pytorch", "dump_data_dir": None,
           "data": dict(records)}
    (folder / "dump.json").write_text(json.dumps(doc))
    (folder / "construct.json").write_text(json.dumps(construct or {}))
    return root


def _call(inputs: list[dict], output: dict, **kwargs: object) -> dict:
    return {"input_args": inputs, "input_kwargs": {k: {"type": type(v).__name__, "value": v} for k, v in kwargs.items()},
            "output": [output]}


def _causal_conv(left_pad: bool, slip: float = 0.0) -> list[tuple[str, dict]]:
    """linear -> causal conv -> silu -> linear: the original pads both sides (conv output [2, 4, 11], sliced
    to 8 by an op msprobe does not dump); the refactor pads left itself, its conv sees [2, 4, 11] with no
    padding. Same values from the silu on; `slip` changes the silu's output."""
    conv_in = _tensor([2, 4, 11], 3.0) if left_pad else _tensor([2, 4, 8], 3.0)
    conv_out = _tensor([2, 4, 8], 5.0) if left_pad else _tensor([2, 4, 11], 6.0)
    records = [("Functional.linear.0.forward", _call([_tensor([2, 8, 4], 2.0)], _tensor([2, 8, 4], 3.0)))]
    if left_pad:
        records.append(("Functional.pad.0.forward", _call([_tensor([2, 4, 8], 3.0)], conv_in)))
    records += [("Functional.conv1d.0.forward", _call([conv_in], conv_out, groups=4)),
                ("Functional.silu.0.forward", _call([_tensor([2, 4, 8], 5.0)], _tensor([2, 4, 8], 4.0 + slip))),
                ("Functional.linear.1.forward", _call([_tensor([2, 8, 4], 4.0 + slip)], _tensor([2, 8, 4], 1.0 + slip)))]
    return records


def test_a_call_whose_shapes_changed_is_one_sided_when_the_records_after_it_line_up(tmp_path):
    golden = _dump(tmp_path / "g", _causal_conv(left_pad=False))
    refactor = compare_dumps(str(_dump(tmp_path / "t", _causal_conv(left_pad=True))), str(golden))
    assert refactor.first_divergence is None and refactor.exit_code == 0
    assert {"step0/rank0: Functional.conv1d.0.forward only in the target",
            "step0/rank0: Functional.conv1d.0.forward only in the golden"} <= set(refactor.unmatched)
    assert {r.key for r in refactor.records} == {"Functional.linear.0.forward", "Functional.silu.0.forward",
                                                   "Functional.linear.1.forward"}

    slipped = compare_dumps(str(_dump(tmp_path / "s", _causal_conv(left_pad=True, slip=1.0))), str(golden))
    assert slipped.first_divergence.key == "Functional.silu.0.forward"
    assert slipped.one_sided_before == ("Functional.pad.0.forward", "Functional.conv1d.0.forward")


def test_a_shape_change_that_never_lines_up_again_fails_on_its_shape(tmp_path):
    def run(width: int) -> list[tuple[str, dict]]:
        return [("Functional.linear.0.forward", _call([_tensor([2, 4], 1.0)], _tensor([2, 4], 2.0))),
                ("Functional.linear.1.forward", _call([_tensor([2, 4], 2.0)], _tensor([2, width], 3.0))),
                ("Functional.gelu.0.forward", _call([_tensor([2, width], 3.0)], _tensor([2, width], 2.5)))]

    result = compare_dumps(str(_dump(tmp_path / "t", run(6))), str(_dump(tmp_path / "g", run(8))))
    assert result.exit_code == 1
    assert result.first_divergence.key == "Functional.linear.1.forward"
    assert result.first_divergence.worst.metric == "shape"


def test_the_first_divergence_names_its_module_and_the_parameter_an_argument_is(tmp_path):
    def run(weight_top: float) -> Path:
        weight, bias = _tensor([32, 1], 2.0, weight_top), _tensor([32], 1.0)
        x = _tensor([2, 8, 1], 0.5)
        out = _tensor([2, 8, 32], 9.0 * weight_top)
        module = {"input_args": [x], "input_kwargs": {}, "output": [out],
                  "parameters": {"weight": weight, "bias": bias}}
        records = [("Functional.linear.0.forward", _call([x, weight, bias], out)),
                   ("Module.layers.0.dt_proj.Linear.forward.0", module)]
        construct = {"Functional.linear.0.forward": "Module.layers.0.dt_proj.Linear.forward.0",
                     "Module.layers.0.dt_proj.Linear.forward.0": "Module.layers.0.Block.forward.0"}
        return _dump(tmp_path / str(weight_top), records, construct)

    result = compare_dumps(str(run(1.0)), str(run(0.5)))
    first = result.first_divergence
    assert first.key == "Functional.linear.0.forward"
    assert first.scope == "layers.0.dt_proj (Linear)"
    assert ("input_args.1", "layers.0.dt_proj.weight") in first.parameters
    assert all(slot != "input_args.0" for slot, _ in first.parameters)  # the activation is no parameter


def _norm_then_linear(fused: bool, epsilon: float | None = None) -> tuple[list[tuple[str, dict]], dict[str, str | None]]:
    """An RMSNorm module (eager: pow, mean, add eps, rsqrt, mul; fused: npu_rms_norm) and a linear after it;
    the outputs agree to the statistics' last digit (eps 1e-6 for 1e-5 changes them by less than the bound)."""
    x, out = _tensor([2, 8, 16], 16.0), _tensor([2, 8, 16], 16.0)
    scope = "Module.norm.RMSNorm.forward.0"
    if fused:
        kwargs = {} if epsilon is None else {"epsilon": epsilon}
        norm = [("NPU.npu_rms_norm.0.forward", _call([x, _tensor([16], 4.0)], out, **kwargs))]
    else:
        var = _tensor([2, 8, 1], 4.0)
        norm = [("Tensor.pow.0.forward", _call([x], _tensor([2, 8, 16], 30.0))),
                ("Tensor.mean.0.forward", _call([_tensor([2, 8, 16], 30.0)], var)),
                ("Tensor.__add__.0.forward", {"input_args": [var, {"type": "float", "value": 1e-5}],
                                              "input_kwargs": {}, "output": [var]}),
                ("Torch.rsqrt.0.forward", _call([var], var)),
                ("Tensor.__mul__.0.forward", _call([x, var], out))]
    records = [*norm, ("Module.norm.RMSNorm.forward.0", _call([x], out)),
               ("Functional.linear.0.forward", _call([out], _tensor([2, 8, 4], 3.0)))]
    return records, {key: scope for key, _ in norm} | {scope: None}


def test_a_fused_rms_norm_with_another_epsilon_fails_on_it(tmp_path):
    golden = _dump(tmp_path / "g", *_norm_then_linear(fused=False))
    same = compare_dumps(str(_dump(tmp_path / "same", *_norm_then_linear(fused=True, epsilon=1e-5))), str(golden))
    assert same.exit_code == 0 and same.first_divergence is None

    default = compare_dumps(str(_dump(tmp_path / "default", *_norm_then_linear(fused=True))), str(golden))
    first = default.first_divergence
    assert default.exit_code == 1 and first.key == "NPU.npu_rms_norm.0.forward" and first.scope == "norm (RMSNorm)"
    assert first.argument_diffs == ("epsilon: 1e-05 (the original adds it before rsqrt) → 1e-06 "
                                    "(npu_rms_norm's default)",)
    assert [r.key for r in default.records if r.status == "fail"] == ["NPU.npu_rms_norm.0.forward"]


def test_a_module_record_names_its_differing_parameter_before_its_outputs(tmp_path):
    """Level L0 has module records only: a weight drawn with another std makes both the weight and the output
    differ, the output by more; the cause named is the weight."""
    def run(std: float) -> Path:
        x, weight = _tensor([2, 8, 16], 4.0), _tensor([48, 16], 27.7 * std, 2 * std)
        module = {"input_args": [x], "input_kwargs": {}, "output": [_tensor([2, 8, 48], 400.0 * std ** 1.2)],
                  "parameters": {"weight": weight, "bias": _tensor([48], 0.0, 0.0)}}
        return _dump(tmp_path / str(std), [("Module.blocks.0.attn.qkv.Linear.forward.0", module)])

    first = compare_dumps(str(run(0.02)), str(run(0.05))).first_divergence
    assert first.worst.slot == "parameters.weight"
    assert max(s.value for s in first.slots) > first.worst.value  # the output moved more, and is not named


def _rotary(fused: bool, cos_norm: float = 7.0) -> tuple[list[tuple[str, dict]], dict[str, str | None]]:
    """q rotated inside an attention module (eager: q * cos + rotate_half(q) * sin; fused: npu_rotary_mul on
    [1, 1, S, D] views of the tables), then the output projection. A rotation keeps every norm, so the
    records after it agree to the statistics' last digit whatever the tables."""
    def table(norm: float, shape: list[int]) -> dict:
        return {**_tensor(shape, norm), "requires_grad": False}

    q, out = _tensor([2, 2, 8, 8], 1.9), _tensor([2, 2, 8, 8], 1.9)
    scope = "Module.attention.Attention.forward.0"
    if fused:
        rotary = [("NPU.npu_rotary_mul.0.forward", _call([q, table(cos_norm, [1, 1, 8, 8]), table(3.9, [1, 1, 8, 8])], out))]
    else:
        rotary = [("Tensor.__mul__.0.forward", _call([q, table(7.0, [8, 8])], _tensor([2, 2, 8, 8], 1.7))),
                  ("Tensor.__mul__.1.forward", _call([q, table(3.9, [8, 8])], _tensor([2, 2, 8, 8], 0.8))),
                  ("Tensor.__add__.0.forward", _call([_tensor([2, 2, 8, 8], 1.7), _tensor([2, 2, 8, 8], 0.8)], out))]
    records = [*rotary, (scope, _call([_tensor([2, 8, 16], 4.0)], out)),
               ("Functional.linear.0.forward", _call([out], _tensor([2, 8, 16], 1.0)))]
    return records, {key: scope for key, _ in rotary} | {scope: None}


def test_a_fused_rotary_reading_other_tables_fails_naming_cos(tmp_path):
    golden = _dump(tmp_path / "g", *_rotary(fused=False))
    same = compare_dumps(str(_dump(tmp_path / "same", *_rotary(fused=True))), str(golden))
    assert same.exit_code == 0 and same.first_divergence is None

    theta_dump = _dump(tmp_path / "theta", *_rotary(fused=True, cos_norm=7.37))
    (theta_dump / "step0" / "rank0" / "stack.json").write_text(json.dumps(
        {"0": [["NPU.npu_rotary_mul.0.forward"], ["File /work/model.py, line 9, in forward, q = npu_rotary_mul(q, c, s)"]]}))
    theta = compare_dumps(str(theta_dump), str(golden))
    first = theta.first_divergence
    assert first.parameters == ()  # q requires grad, and is no parameter
    assert theta.exit_code == 1 and first.key == "NPU.npu_rotary_mul.0.forward" and first.scope == "attention (Attention)"
    assert first.argument_diffs[0].startswith("rotary tables: the port's npu_rotary_mul reads cos (Norm 7.37; "
                                              "the original's: 3.9, 7)")


def test_a_collective_the_port_no_longer_calls_is_named_before_the_first_divergence(tmp_path):
    def run(reduced: bool) -> Path:
        grad = _tensor([2, 8, 16], 2.0 if reduced else 1.0)
        records = [("Functional.linear.0.backward", {"input": [_tensor([2, 8, 16], 3.0)], "output": [grad]})]
        if reduced:  # msprobe writes a collective called inside a backward as `.forward`
            records[:0] = [("Tensor.contiguous.0.forward", _call([_tensor([2, 8, 16], 1.0)], _tensor([2, 8, 16], 1.0))),
                           ("Distributed.all_reduce.0.forward", _call([_tensor([2, 8, 16], 1.0)], grad))]
        return _dump(tmp_path / str(reduced), records)

    result = compare_dumps(str(run(False)), str(run(True)))
    assert result.first_divergence.key == "Functional.linear.0.backward"
    assert result.lost_collectives == ("Distributed.all_reduce.0.forward",)
