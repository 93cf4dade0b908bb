"""Op work-arounds of human Ascend ports, judged against torch-npu 2.14.0's coverage table (issue 39 item 6).

Still needed: OPS010 (dtype) / OPS011 (argument) findings, raised only while the table says so.
No longer needed: each test below names the table row that says the op, dtype or argument is
supported now, and checks the scan does not ask for the work-around.
"""

from __future__ import annotations

import ast
import dataclasses
import textwrap

import pytest

from migrator.catalogue.coverage import lookup
from migrator.engine import op_workarounds
from migrator.engine.dtype_evidence import ScopeDtypes
from migrator.engine.op_workarounds import ARGUMENT_WORKAROUNDS, DTYPE_WORKAROUNDS, INDEX_DTYPES
from tests.engine.helpers import scan_text

WORKAROUND_CODES = {"OPS002", "OPS003", "OPS010", "OPS011"}


def _findings(tmp_path, code: str, **options) -> list[tuple[str, int, str]]:
    result = scan_text(tmp_path, textwrap.dedent(code), **options)
    return [(f.code, f.line, f.message) for f in result.findings if f.code in WORKAROUND_CODES]


# -- no longer needed in 2.14.0 -------------------------------------------------------------------

def test_foreach_mul_needs_no_loop_its_aten_overloads_have_npu_kernels(tmp_path):
    """`torch._foreach_mul_(grads, s)` unrolled into a loop: op-plugin yaml lists `_foreach_mul_.List/
    .Scalar/.ScalarList` for v2.14, and the table's ATen layer says npu_kernel."""
    for overload in ("_foreach_mul_.List", "_foreach_mul_.Scalar", "_foreach_mul_.ScalarList"):
        assert lookup(f"aten::{overload}").kernel == "npu_kernel"
    assert lookup("torch._foreach_mul_").status not in ("unsupported", "cpu_fallback")
    assert _findings(tmp_path, """
        import torch
        def scale(grads, s):
            torch._foreach_mul_(grads, s)
    """) == []


def test_integer_div_with_rounding_mode_is_supported_out_of_place(tmp_path):
    """`div(rounding_mode="trunc")` on int64 cast to float and back: torch.md `torch.div` lists
    int32/int64 (no argument limit) and `aten::div.Tensor_mode` has an NPU kernel."""
    assert lookup("torch.div", dtype="int64").status == "partial"
    assert lookup("torch.Tensor.div", dtype="int32").status == "partial"
    assert lookup("aten::div.Tensor_mode").kernel == "npu_kernel"
    assert _findings(tmp_path, """
        import torch
        def bucket(n):
            ids = torch.arange(n, dtype=torch.int64)
            return torch.div(ids, 4, rounding_mode="trunc"), ids.div(3, rounding_mode="floor")
    """) == []


def test_integer_div_in_place_still_needs_the_work_around(tmp_path):
    """torch-Tensor.md `div_` lists bf16/fp16/fp32/fp64 only: the in-place form on an index tensor is OPS010."""
    assert lookup("torch.Tensor.div_", dtype="int64").status == "unsupported"
    found = _findings(tmp_path, """
        import torch
        def bucket(n):
            ids = torch.arange(n, dtype=torch.int64)
            ids.div_(4, rounding_mode="trunc")
    """)
    assert [(code, line) for code, line, _ in found] == [("OPS010", 5)]
    assert "torch.div(x, y, rounding_mode=...)" in found[0][2] and "int64" in found[0][2]


def test_integer_topk_largest_false_is_supported(tmp_path):
    """Integer `topk(largest=False)` negated into a float topk: torch.md `torch.topk` lists
    uint8..int64 and its only argument limit is `sorted=False`."""
    entry = lookup("torch.topk", dtype="int32")
    assert entry.status == "partial" and not any("largest" in limit for limit in entry.limits)
    assert lookup("torch.Tensor.topk", dtype="int64").status == "partial"
    assert _findings(tmp_path, """
        import torch
        def smallest(scores, k):
            ids = scores.to(torch.int32)
            return torch.topk(ids, k, largest=False), ids.topk(k, largest=False, sorted=True)
    """) == []


def test_baddbmm_in_bf16_is_documented(tmp_path):
    """`baddbmm` replaced by `bmm` + add: torch.md `torch.baddbmm` lists bf16/fp16/fp32."""
    assert lookup("torch.baddbmm", dtype="bf16").status == "partial"
    assert _findings(tmp_path, """
        import torch
        def scores(bias, q, k):
            q = q.to(torch.bfloat16)
            return torch.baddbmm(bias, q, k, beta=0.0, alpha=0.125)
    """) == []


def test_complex_rotary_embedding_needs_no_real_rewrite():
    """Complex RoPE (`view_as_complex`, complex `mul`, `view_as_real`) rewritten with cos/sin: the
    torch.md rows list fp32 for view_as_complex, complex64 for mul and view_as_real."""
    assert lookup("torch.view_as_complex", dtype="fp32").status == "partial"
    assert lookup("torch.mul", dtype="complex64").status == "partial"
    assert lookup("torch.view_as_real", dtype="complex64").status == "partial"
    assert lookup("torch.polar", dtype="fp32").status == "partial"


def test_where_on_uint8_values_is_documented():
    """uint8 tensors selected with `torch.where`: torch.md `torch.where` lists uint8 and bool."""
    assert lookup("torch.where", dtype="uint8").status == "partial"
    assert lookup("torch.where", dtype="bool").status == "partial"


# -- cannot be determined from the table: not reported ---------------------------------------------

def test_uint8_masks_are_not_judged_the_rows_document_the_filled_tensor_not_the_mask(tmp_path):
    """masked_fill / where / indexing with a uint8 mask: the rows name `self`/`input` dtypes only."""
    assert _findings(tmp_path, """
        import torch
        def fill(x):
            mask = (x > 0).to(torch.uint8)
            return x.masked_fill(mask, 0.0), torch.where(mask, x, 0.0), x[mask]
    """) == []


# -- still needed: the curated lists agree with the table ---------------------------------------

@pytest.mark.parametrize("api", sorted(DTYPE_WORKAROUNDS))
def test_every_dtype_work_around_is_still_needed_for_some_index_dtype(api):
    """A torch-npu release that documents every index dtype for the op retires its entry here."""
    plain = lookup(api)
    assert plain.known and plain.status == "partial"
    assert [d for d in sorted(INDEX_DTYPES) if lookup(api, dtype=d).status == "unsupported"]


@pytest.mark.parametrize("rule", ARGUMENT_WORKAROUNDS, ids=lambda r: f"{r.api}-{r.argument}")
def test_every_argument_work_around_is_stated_by_the_table(rule):
    assert op_workarounds._limit_holds(rule, "A2", None) is not None


def test_a_lifted_limit_silences_the_finding(tmp_path, monkeypatch):
    """The finding follows the table: with `div_` documenting int64 there is nothing to report."""
    code = """
        import torch
        def bucket(n):
            ids = torch.arange(n, dtype=torch.int64)
            ids.div_(4, rounding_mode="trunc")
            torch.topk(ids, 2, sorted=False)
    """
    assert sorted(c for c, _, _ in _findings(tmp_path, code)) == ["OPS010", "OPS011"]
    real = op_workarounds._entry

    def lifted(name, soc, version, dtype=None):
        entry = real(name, soc, version)
        return dataclasses.replace(entry, dtypes=(*entry.dtypes, "int64"), limits=(), status="partial")

    monkeypatch.setattr(op_workarounds, "_entry", lifted)
    assert _findings(tmp_path, code) == []


# -- OPS011 arguments ---------------------------------------------------------------------------

@pytest.mark.parametrize("call, expected", [
    ("torch.topk(x, 3, sorted=False)", "sorted=True"),
    ("x.topk(3, 0, True, False)", "sorted=True"),
    ("torch.sum(x, dtype=torch.float32)", "x.to(dtype).sum"),
    ("nn.LSTM(4, 8, 2, dropout=0.1)", "nn.Dropout"),
    ("nn.LSTM(4, 8, proj_size=4)", "nn.Linear"),
    ("nn.GRU(4, 8, 2, True, False, 0.5)", "nn.Dropout"),
    ("F.kl_div(x, y, reduction='batchmean', log_target=True)", "target.exp()"),
    ("nn.EmbeddingBag(100, 8, mode='mean', sparse=True)", "nn.Embedding"),
    ("nn.Embedding(100, 8, sparse=True)", "sparse=False"),
])
def test_argument_limits_are_reported_with_the_work_around(tmp_path, call, expected):
    found = _findings(tmp_path, f"import torch\nimport torch.nn as nn\nimport torch.nn.functional as F\ny = {call}\n")
    assert [(c, line) for c, line, _ in found if c == "OPS011"] == [("OPS011", 4)]
    assert expected in next(m for c, _, m in found if c == "OPS011")


@pytest.mark.parametrize("call", [
    "torch.topk(x, 3)", "torch.topk(x, 3, sorted=flag)", "torch.sum(x, dtype=None)", "x.sum(dtype=torch.float32)",
    "nn.LSTM(4, 8, 2, dropout=0.0)", "nn.LSTM(4, 8, 2, dropout=p)", "F.kl_div(x, y, log_target=False)",
    "nn.Embedding(100, 8, sparse=False)",
])
def test_argument_values_the_table_allows_or_we_cannot_read_are_not_reported(tmp_path, call):
    found = _findings(tmp_path, f"import torch\nimport torch.nn as nn\nimport torch.nn.functional as F\ny = {call}\n")
    assert [c for c, _, _ in found if c == "OPS011"] == []


# -- dtype evidence: proven in the same function or not judged -----------------------------------

def _dtypes(code: str) -> ScopeDtypes:
    tree = ast.parse(textwrap.dedent(code))
    func = tree.body[-1]
    assert isinstance(func, ast.FunctionDef)

    def qualnames(node: ast.AST) -> set[str]:
        text = ast.unparse(node)
        return {text} if text.startswith("torch.") else set()
    return ScopeDtypes(func, func.body, qualnames)


def test_dtype_evidence_reads_factories_casts_and_copies():
    scope = _dtypes("""
        def f(x, n):
            a = torch.zeros(n, dtype=torch.int32)
            b = x.byte()
            c = x.to(torch.uint8)
            d = x.to("npu", dtype=torch.bool)
            e = torch.tensor([[1, 2], [3, 4]])
            g = torch.argsort(x)
            h = a
            i = torch.tensor([1.5])
    """)
    assert [scope.dtype(n) for n in "abcdeghi"] == ["int32", "uint8", "uint8", "bool", "int64", "int64", "int32", None]


def test_dtype_evidence_gives_up_on_parameters_rebindings_and_loops():
    scope = _dtypes("""
        def f(x, items):
            x = x.long()
            y = torch.zeros(3, dtype=torch.int32)
            y = y.float()
            for z in items:
                pass
            z = z.int()
            w = w.long() if False else None
            t = torch.zeros(2, dtype=torch.int8)
            t += 1
    """)
    assert [scope.dtype(n) for n in ("x", "y", "z", "w", "t", "unbound")] == [None, None, None, None, None, None]


def test_a_name_of_another_function_or_comprehension_is_not_judged(tmp_path):
    assert _findings(tmp_path, """
        import torch
        def make(n):
            ids = torch.zeros(n, dtype=torch.int32)
            return ids
        def use(ids, idx, src):
            ids.index_add_(0, idx, src)
            return [ids.kthvalue(2) for ids in [torch.zeros(3, dtype=torch.int64)]]
    """) == []
