"""The committed table: schema, size, no prose, header, and the acceptance facts."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest

from op_coverage import aten_layer, docs_limits, facts, real_inputs, table_output

CJK = re.compile(r"[\u2e80-\u9fff\u3000-\u303f\uff00-\uffef]")


@pytest.fixture(scope="module")
def raw(cov):
    return json.loads(cov.TABLE.read_bytes())


def test_table_validates_against_schema(cov, raw):
    jsonschema = pytest.importorskip("jsonschema")
    schema = json.loads(cov.SCHEMA.read_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    errors = sorted(jsonschema.Draft202012Validator(schema).iter_errors(raw), key=lambda e: list(e.path))
    assert not errors, [f"{list(e.path)}: {e.message[:200]}" for e in errors[:5]]


def test_table_is_compact_ascii_and_prose_free(cov, raw):
    data = cov.TABLE.read_bytes()
    assert len(data) < 3_000_000
    assert data.isascii()
    assert not CJK.search(json.dumps(raw, ensure_ascii=False))


def test_table_is_canonical(cov, raw):
    # what the generator would write for this content (sorted keys, one entry per line)
    assert table_output.dump_table(raw) == cov.TABLE.read_bytes()


def test_header_records_inputs(raw):
    assert raw["torch_npu_version"] == "2.14.0"
    assert raw["generator"]["version"]
    inputs = raw["inputs"]
    assert inputs["torch_npu_wheel"]["sha256"] == "7736f7d82cf9f16c7dfc4537f7e7c638153da760273a193455e70857f912189e"
    assert inputs["torch_npu_wheel"]["version"] == "2.14.0"
    assert inputs["torch"]["version"] == "2.13.0"
    assert re.fullmatch(r"[0-9a-f]{64}", inputs["torch"]["files_sha256"]["torchgen/packaged/ATen/native/native_functions.yaml"])
    assert inputs["ascend_pytorch_docs"]["commit"] == "9e73e708ab9350d203475609f36f8a43f6a0c2ab"
    assert inputs["ascend_pytorch_docs"]["licence"] == "CC BY 4.0"
    assert inputs["op_plugin_derivatives"]["commit"] == "517f2e7d0f202f38b76310706cb977ca2388ad21"
    assert "CC BY 4.0" in raw["attribution"]
    assert "2.13.0" in raw["combined"] and "2.14.0" in raw["combined"]
    assert set(raw["rules"]) >= {"status", "unlisted", "dtypes", "npu_name"}
    assert {"torch": "2.12.0", "torch_npu": "2.12.0.post3", "requires": "torch==2.12.0"} in raw["torch_pairings"]["pairs"]


NATIVE_FUNCTIONS = "torchgen/packaged/ATen/native/native_functions.yaml"
# the generator's --shared-data default (../shared/data next to the checkout), or this variable
SHARED_DATA = Path(os.environ.get("ASCEND_MIGRATE_SHARED_DATA", Path(__file__).resolve().parents[3] / "shared" / "data"))


def test_aten_layer_counts(raw):
    """The aten layer holds one class per overload of the torch input the header records."""
    counts = raw["counts"]
    assert counts["aten_by_kernel"] == {k: len(ops) for k, ops in raw["aten"].items()}
    assert counts["aten_overloads"] == sum(counts["aten_by_kernel"].values())
    try:
        yaml_path = real_inputs.find_torch_file(NATIVE_FUNCTIONS)
    except Exception:  # noqa: BLE001 - no torch here: the acceptance facts below still run
        yaml_path = None
    if yaml_path is not None and facts.sha256_file(yaml_path) == raw["inputs"]["torch"]["files_sha256"][NATIVE_FUNCTIONS]:
        parsed = aten_layer.parse_native_functions(yaml_path.read_text(encoding="utf-8"), set())
        assert counts["aten_overloads"] == len(parsed.overloads)
    aten = {op: k for k, ops in raw["aten"].items() for op in ops}
    for op in ("mode", "_transformer_encoder_layer_fwd", "_scaled_dot_product_flash_attention"):
        assert aten[op] == "cpu_fallback"
    for op in ("rms_norm", "linear", "embedding_bag"):
        assert aten[op] == "decomposes"
    for op in ("_fused_adamw_", "_embedding_bag", "isin.Tensor_Tensor_out", "scaled_dot_product_attention"):
        assert aten[op] == "npu_kernel"


def test_docs_rows_all_present(raw):
    """One docs entry per row of the docs snapshot (when the shared snapshot is here), each naming its page."""
    docs = {name: e for name, e in raw["entries"].items() if e["origin"] == "docs"}
    assert len(docs) == raw["counts"]["by_origin"]["docs"]
    assert all(any(src.startswith("docs:") for src in e["sources"]) for e in docs.values())
    folder = SHARED_DATA / facts.DOCS_DIR
    if not folder.is_dir():
        pytest.skip(f"docs snapshot not at {folder}")
    rows = [row for page in sorted(folder.glob("*.md")) for row in docs_limits.parse_docs_md(page.read_text("utf-8"), page.name)]
    assert {row.name for row in rows} <= set(raw["entries"])
    assert len(docs) == len({row.name for row in rows} - {n for n, e in raw["entries"].items() if e["origin"] != "docs"})


def test_counts_match_entries(raw):
    counts = raw["counts"]
    assert counts["entries"] == len(raw["entries"])
    for soc in raw["soc_order"]:
        assert sum(counts["status_by_soc"][soc].values()) == counts["entries"]


# -- acceptance facts ------------------------------------------------------------------------


def test_fact_embedding_bag_unsupported_on_a2():
    from migrator.catalogue.coverage import lookup

    assert lookup("torch.nn.functional.embedding_bag", soc="A2").status == "unsupported"


def test_fact_data_parallel_unsupported():
    from migrator.catalogue.coverage import lookup, socs

    for soc in socs():
        assert lookup("torch.nn.DataParallel", soc=soc).status == "unsupported"


def test_fact_gelu_partial_tanh_only():
    from migrator.catalogue.coverage import lookup

    e = lookup("torch.nn.functional.gelu", soc="A2")
    assert e.status == "partial"
    assert "approximate='tanh' only" in e.note
    assert e.limits == ("approximate='tanh' only",)
    assert not CJK.search(e.note)


def test_fact_cuda_synchronize_maps_to_npu():
    from migrator.catalogue.coverage import lookup

    e = lookup("torch.cuda.synchronize")
    assert e.npu_name == "torch.npu.synchronize"
    assert e.status == "supported"
    assert "transfer_to_npu" in e.flags


def test_fact_npu_fusion_attention_has_autograd():
    from migrator.catalogue.coverage import lookup

    e = lookup("torch_npu.npu_fusion_attention")
    assert "autograd" in e.flags
    assert e.kernel == "npu_kernel"
    assert e.signature.startswith("npu_fusion_attention(Tensor query, Tensor key, Tensor value, int head_num")
    assert lookup("torch.ops.npu.npu_fusion_attention").name == "torch_npu.npu_fusion_attention"


def test_fact_matmul():
    from migrator.catalogue.coverage import lookup

    a2 = lookup("torch.matmul", soc="A2")
    assert a2.status == "partial"
    assert a2.dtypes == ("fp16", "fp32")
    assert a2.bf16_undocumented is True
    assert a2.kernel == "npu_kernel"
    assert lookup("torch.matmul", soc="950DT").status == "unsupported"


@pytest.mark.parametrize("name", ["torch.nn.Linear", "torch.nn.functional.silu", "torch.nn.functional.cross_entropy"])
def test_fact_bf16_undocumented_core_ops(name):
    from migrator.catalogue.coverage import lookup

    e = lookup(name, soc="A2")
    assert e.bf16_undocumented is True
    assert "bf16" not in e.dtypes and e.status == "partial"
    # info only: asking for bf16 does not degrade the status
    assert lookup(name, soc="A2", dtype="bf16").status == "partial"


def test_fact_cuda_graph_and_double_tensor():
    from migrator.catalogue.coverage import lookup

    graph = lookup("torch.cuda.CUDAGraph")
    assert graph.npu_name == "torch.npu.NPUGraph" and "inference_only" in graph.flags
    double = lookup("torch.cuda.DoubleTensor")
    assert double.npu_name == "torch.npu.FloatTensor" and "precision_change" in double.flags


def test_fact_copy_paste_dtype_limits_ignored():
    from migrator.catalogue.coverage import lookup

    e = lookup("torch.backends.cudnn.benchmark", soc="A2")
    assert e.status == "supported" and e.dtypes == () and "doc_dtype_ignored" in e.flags
