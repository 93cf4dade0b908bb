"""Census pieces without a child process: API names, verdicts of recorded rows, text table."""

from __future__ import annotations

import pytest

from migrator.catalogue.coverage import lookup
from migrator.census.model import Census
from migrator.census.verdicts import judge
from migrator.reporters.census import render

USER = {"path": "model.py", "line": 13, "function": "Head.forward"}
LIB = {"path": "/x/site-packages/torch/distributions/gamma.py", "line": 97, "function": "Gamma.log_prob"}


def _row(op, dtypes, phase="forward", user=USER, library=LIB, count=1, dispatched=True):
    return {"level": "aten" if op.startswith("aten::") else "api", "op": op, "dtypes": dtypes, "phase": phase,
            "count": count, "user_frame": user, "library_frame": library, "dispatched": dispatched}


def test_api_names_are_the_public_torch_names():
    torch = pytest.importorskip("torch")
    from migrator.census.tracer import api_name

    assert api_name(torch.add) == "torch.add"
    assert api_name(torch.Tensor.masked_fill_) == "torch.Tensor.masked_fill_"
    assert api_name(torch.nn.functional.layer_norm) == "torch.nn.functional.layer_norm"
    assert api_name(torch._C._nn.linear) == "torch.nn.functional.linear"
    assert api_name(torch.Tensor.backward) == "torch.Tensor.backward"
    assert api_name(torch.Tensor.grad.__get__) is None  # attribute access is not an op


def test_cpu_fallback_from_library_code_is_a_finding_naming_the_user_line():
    (op,) = judge([_row("aten::lgamma", ["bf16"])], "A2", None)
    assert op.status == lookup("aten::lgamma", soc="A2").status == "cpu_fallback"
    assert (op.code, op.severity) == ("OPS003", "warning")
    assert "model.py:13" in op.message and "Gamma.log_prob" in op.message
    assert "torch/distributions/gamma.py:97" in op.message


def test_partial_op_inside_its_documented_dtypes_is_fine_outside_is_unsupported():
    entry = lookup("torch.nn.functional.silu", soc="A2")
    assert entry.status == "partial" and "fp32" in entry.dtypes and "fp64" not in entry.dtypes
    inside, outside = judge([_row("torch.nn.functional.silu", ["fp32"]), _row("torch.nn.functional.silu", ["fp64"])],
                            "A2", None)
    assert (inside.verdict, inside.code) == ("partial", None)
    assert (outside.verdict, outside.code) == ("unsupported", "OPS002")


def test_metadata_only_calls_and_setup_ops_are_not_judged():
    meta, setup = judge([_row("torch.Tensor.float_power_", ["fp32"], dispatched=False),
                         _row("torch.nn.functional.silu", ["fp64"], phase="setup")], "A2", None)
    assert lookup("torch.Tensor.float_power_", soc="A2", dtype="fp32").status == "unsupported"  # its dtype list
    assert meta.verdict == "partial" and meta.code is None
    # a metadata API's copy-paste dtype line is not in the table at all
    assert lookup("torch.is_complex", soc="A2", dtype="bf16").status == "supported"
    assert setup.verdict == "unsupported" and setup.code is None


def test_cpu_backend_kernel_choices_are_recorded_not_judged():
    (op,) = judge([_row("aten::_scaled_dot_product_flash_attention_for_cpu", ["bf16"])], "A2", None)
    assert op.status == "cpu_fallback" and op.host_kernel and op.code is None


def test_float64_is_a_finding_where_the_op_lacks_fp64():
    assert lookup("aten::mm", soc="A2").dtypes == ()
    (mm,) = judge([_row("aten::mm", ["fp64", "fp64"])], "A2", None)
    (bf16,) = judge([_row("aten::mm", ["bf16", "bf16"])], "A2", None)
    assert mm.code == "OPS006" and "float64" in mm.message
    assert bf16.code is None


def test_sites_merge_per_frame_and_the_table_is_worst_first():
    ops = judge([_row("aten::mm", ["bf16", "bf16"], count=3), _row("aten::mm", ["bf16", "bf16"], count=2),
                 _row("aten::mm", ["bf16", "bf16"], phase="backward", user=None, library=None),
                 _row("aten::lgamma", ["bf16"])], "A2", None)
    mm = next(o for o in ops if o.op == "aten::mm")
    assert mm.count == 6 and len(mm.sites) == 2 and mm.phases == ("forward", "backward")
    census = Census({"target": "t", "mode": "protocol", "steps": 1}, "A2", "2.14.0", "", 0.5, ops)
    rows = [ln for ln in render(census).splitlines() if "aten::" in ln and " warning: " not in ln]
    assert "aten::lgamma" in rows[0] and "OPS003" in rows[0]
    assert Census.from_json(census.to_json()) == census
