"""Op verdicts that mean an action: a dtype limit is a finding only for a dtype the program uses;
metadata ops get no verdict; a module is judged by its values' dtype, never its index input."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from migrator import api
from migrator.catalogue.coverage import iter_entries, lookup
from migrator.catalogue.coverage._dtypes import DTYPE_BLIND_APIS, VALUE_DTYPES, dtype_outside, training_dtypes
from migrator.census.verdicts import judge
from migrator.engine.coverage_checker import _verdict


def _scan(tmp_path: Path, files: dict[str, str]):
    for name, text in files.items():
        (tmp_path / name).write_text(text, encoding="utf-8")
    return api.scan([tmp_path], root=tmp_path, use_cache=False)


def _ops(result) -> dict[str, str]:
    return {op.name: op.status for op in (result.summary.coverage.ops if result.summary.coverage else ())}


def _limits(soc: str = "A2"):
    """(entry, dtype) for every documented value-dtype limit of the table: a value dtype the entry's
    list leaves out (bf16 on a documentation-gap entry is not a limit) or excludes."""
    for entry in iter_entries(soc):
        if entry.status not in ("supported", "partial"):
            continue
        values = [d for d in entry.dtypes if d in VALUE_DTYPES]
        for dtype in VALUE_DTYPES:
            excluded = dtype in entry.dtypes_excluded
            outside = bool(values) and dtype not in values and not (dtype == "bf16" and entry.bf16_undocumented)
            if excluded or outside:
                yield entry, dtype


def test_every_documented_dtype_limit_is_still_reported_when_the_program_uses_that_dtype():
    limits = list(_limits())
    assert len(limits) > 1000  # the table's limits, not a handful
    missed = []
    for entry, dtype in limits:
        impl, message, status = _verdict(entry, entry.name, "A2", None, {}, frozenset({dtype}))
        census = lookup(entry.name, soc="A2", dtype=dtype).status
        if entry.status == "partial" and (impl != "op-partial" or dtype not in message or status != "partial"):
            missed.append((entry.name, dtype, "scan"))
        if census != "unsupported":
            missed.append((entry.name, dtype, "census"))
    assert missed == []


def test_a_dtype_the_program_never_uses_is_not_a_finding():
    gelu = lookup("torch.nn.functional.gelu", soc="A2")
    assert "fp64" not in gelu.dtypes and gelu.status == "partial"
    assert _verdict(gelu, gelu.name, "A2", None, {}, frozenset({"fp32", "bf16"}))[::2] == (None, "supported")
    assert dtype_outside(gelu, {"fp32", "fp64"}) == "fp64"


def test_identity_and_metadata_have_no_dtype_limit_on_a2():
    for name in ("torch.nn.Identity", "torch.Tensor.size", "torch.Tensor.dim", "torch.Tensor.item",
                 "torch.Tensor.numel"):
        assert lookup(name, soc="A2", dtype="bf16").status == "supported", name
    assert {"torch.nn.Identity", "torch.Tensor.size"} <= DTYPE_BLIND_APIS


def test_census_judges_identity_in_bf16_as_supported_and_softmax_outside_its_list():
    rows = [{"level": "api", "op": op, "dtypes": ["bf16"], "phase": "forward", "count": 1, "user_frame": None,
             "library_frame": None, "dispatched": True, "shapes": None}
            for op in ("torch.nn.Identity", "torch.Tensor.size")]
    assert [(o.op, o.verdict, o.code) for o in judge(rows, "A2", None)] == [
        ("torch.Tensor.size", "supported", None), ("torch.nn.Identity", "supported", None)]


def test_embedding_is_judged_by_its_weight_not_its_indices():
    emb = lookup("torch.nn.Embedding", soc="A2")
    assert emb.dtypes == () and any("indices: int32, int64" in limit for limit in emb.limits)
    assert lookup("torch.nn.Embedding", soc="A2", dtype="bf16").status != "unsupported"


def test_scan_metadata_ops_get_no_verdict_and_bf16_limits_are_judged_across_files(tmp_path):
    result = _scan(tmp_path, {
        "model.py": ("import torch\n"
                     "def f(x: torch.Tensor):\n"
                     "    x = torch.zeros(3)\n"
                     "    n = x.size(0) + x.dim() + x.numel()\n"
                     "    y = torch.nn.functional.grid_sample(x, x)\n"
                     "    torch.nn.init.normal_(x)\n"
                     "    return torch.nn.Identity()(x), torch.nn.Embedding(10, 4)(x), n, x.item(), y\n"),
        "train.py": "import torch\nmodel = None\nDTYPE = torch.bfloat16\n",
    })
    ops = _ops(result)
    assert not {"torch.Tensor.size", "torch.Tensor.dim", "torch.Tensor.numel", "torch.Tensor.item"} & set(ops)
    assert ops["torch.nn.Identity"] == "supported" and ops["torch.nn.Embedding"] == "supported"
    notes = [(f.path, f.line, f.message) for f in result.findings if f.code == "OPS004"]
    # grid_sample is documented for fp16, fp32, fp64; train.py shows the program runs in bf16
    assert notes == [("model.py", 5, "`torch.nn.functional.grid_sample` is documented on A2 for fp16, fp32, fp64; "
                                     "the program uses bf16")]
    assert ops["torch.nn.functional.grid_sample"] == "partial"
    # nn.init (fp32 only in the docs) runs at construction, before the program's bf16 applies
    assert ops["torch.nn.init.normal_"] == "supported"


def test_the_same_tree_in_fp32_only_has_no_dtype_note_and_a_local_cast_counts(tmp_path):
    result = _scan(tmp_path, {"model.py": "import torch\nx = torch.zeros(3)\ny = torch.nn.functional.grid_sample(x, x)\n"})
    assert [f for f in result.findings if f.code == "OPS004"] == []
    assert _ops(result)["torch.nn.functional.grid_sample"] == "supported"
    init = _scan(tmp_path, {"model.py": "import torch\nx = torch.zeros(3).half()\ntorch.nn.init.normal_(x)\n"})
    assert [f.line for f in init.findings if f.code == "OPS004"] == [3]


def test_training_dtypes_reads_code_configs_and_launch_lines_not_english():
    assert training_dtypes([b'"bf16": {"enabled": true}', b"--dtype float16", b"x.double()"]) == ("bf16", "fp16")
    assert training_dtypes([b"# half the batch", b"x = torch.float64"]) == ()


# the word-boundary regex `training_dtypes` used before it searched each spelling without the leading `\b`
_BOUNDARY_EVIDENCE = re.compile(rb"\b(?P<bf16>bfloat16|bf16)\b|\b(?P<fp16>float16|fp16)\b|(?P<half>\btorch\.half\b|\.half\(\))")


@pytest.mark.parametrize("text", [
    b"bf16", b"xbf16 fp16x", b"_bf16", b"bfloat16_t", b"torch.bfloat16", b"mytorch.half()", b"mytorch.half",
    b"torch.half", b"torch.halfway", b"x.half( )", b"behalf", b"float16", b"bfloat16", b"1fp16", b"fp16,bf16",
    b"\xc3bf16", b"-fp16", b"torch.half_precision and y.half()", b"a_float16 b.float16",
])
def test_training_dtypes_matches_the_word_boundary_search(text):
    expected = tuple(d for d in ("bf16", "fp16")
                     if d in {"fp16" if m.lastgroup == "half" else m.lastgroup for m in _BOUNDARY_EVIDENCE.finditer(text)})
    assert training_dtypes([text]) == expected
