"""`--kernel` / `--kernel-args` / `--grid` parsing (no triton needed)."""

from __future__ import annotations

import pytest

from migrator.validation.kernel_spec import KernelSpecError, ScalarArg, TensorArg, parse_args, parse_grid, parse_kernel


def test_the_brief_s_spec_reads_as_tensors_and_scalars():
    args = parse_args("x:float32[4096],y:float32[4096],out:float32[4096],n=4096,BLOCK=1024")
    assert args[:3] == tuple(TensorArg(n, "float32", (4096,)) for n in ("x", "y", "out"))
    assert args[3:] == (ScalarArg("n", 4096), ScalarArg("BLOCK", 1024))


def test_shapes_ranges_and_the_json_form():
    assert parse_args("labels:int64[2,3]~0:10,eps=1e-6") == (TensorArg("labels", "int64", (2, 3), 0.0, 10.0),
                                                            ScalarArg("eps", 1e-6))
    assert parse_args('{"x": "bfloat16[8,4]", "n": 8, "flag": true}') == (
        TensorArg("x", "bfloat16", (8, 4)), ScalarArg("n", 8), ScalarArg("flag", True))


def test_string_constexprs_and_unused_pointers():
    """Liger's cross-entropy takes `reduction: tl.constexpr` ("mean") and `weight_ptr=None`."""
    assert parse_args("reduction='mean',act=\"leaky,relu\",w=None,n=3") == (
        ScalarArg("reduction", "mean"), ScalarArg("act", "leaky,relu"), ScalarArg("w", None), ScalarArg("n", 3))
    assert parse_args('{"reduction": "\'mean\'", "w": null, "x": "float32[2]"}') == (
        ScalarArg("reduction", "mean"), ScalarArg("w", None), TensorArg("x", "float32", (2,)))
    with pytest.raises(KernelSpecError, match="not a number, True/False, None or a quoted string"):
        parse_args("reduction='mean")


@pytest.mark.parametrize("bad, says", [
    ("x:float33[4]", "dtype one of"), ("x:float32[0]", "positive sizes"), ("n=four", "not a number"),
    ("x:float32[4],x=3", "given twice"), ("{not json", "not valid JSON"), ("justaname", "neither"),
])
def test_bad_args_say_which_part(bad, says):
    with pytest.raises(KernelSpecError, match=says):
        parse_args(bad)


def test_kernel_and_grid():
    assert parse_kernel("ops/add.py::add_kernel").kernel == "add_kernel"
    assert parse_grid("16,8") == (16, 8) and parse_grid("(4,)") == (4,)
    for bad in ("ops/add.py", "a.py::", "a.py::1x"):
        with pytest.raises(KernelSpecError, match="FILE::KERNEL"):
            parse_kernel(bad)
    for bad in ("0", "1,2,3,4", "a"):
        with pytest.raises(KernelSpecError, match="--grid"):
            parse_grid(bad)


def test_without_triton_the_message_names_the_extra(tmp_path, monkeypatch):
    import importlib.util

    from migrator import api
    from migrator.ground.usage_error import UsageError

    kernel = tmp_path / "k.py"
    kernel.write_text("import triton\n")
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "triton" else real(name, *a))
    with pytest.raises(UsageError, match=r"pip install 'ascend-migrate\[kernels\]'"):
        api.validate_kernel(f"{kernel}::k", "n=1", "1")
