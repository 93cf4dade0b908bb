"""op_coverage/generate.py parsers and builder, on small excerpts of every input format."""

from __future__ import annotations

import json
import zipfile

import pytest

from op_coverage import aten_layer, docs_limits, facts, real_inputs, table_build, table_output, wheel_sources

# -- codegen yaml --------------------------------------------------------------------------


def test_codegen_yaml_sections_and_custom_ops(cov):
    info = aten_layer.parse_codegen_yaml(cov.text("wheel", "torch_npu", "csrc", "aten", "npu_native_functions_by_codegen.yaml"))
    assert info.section_counts == {"supported": 7, "symint": 2, "autograd": 1, "quant": 1, "custom": 6}
    # bare strings, dicts with a bare name and dicts with a full schema all give name.overload
    assert {"empty_like", "clone", "matmul", "gelu.out", "add.Tensor", "as_strided_", "embedding"} <= info.npu_ops
    assert {"dequantize.self", "_thnn_fused_gru_cell", "npu_format_cast.Tensor"} <= info.npu_ops
    fa = info.custom["npu_fusion_attention"]
    assert fa["exposed"] is True and fa["tags"] == {"nondeterministic_seeded"}
    assert fa["schemas"]["npu_fusion_attention"].startswith("npu_fusion_attention(Tensor query")
    assert set(info.custom["npu_format_cast"]["schemas"]) == {"npu_format_cast", "npu_format_cast.Tensor"}
    assert info.custom["npu_rms_norm"]["exposed"] is False


def test_codegen_yaml_rejects_other_yaml():
    with pytest.raises(facts.GenerationError):
        aten_layer.parse_codegen_yaml("backend: NPU\n")


# -- native_functions.yaml -----------------------------------------------------------------


def test_native_functions_classification(cov):
    npu_ops = aten_layer.parse_codegen_yaml(
        cov.text("wheel", "torch_npu", "csrc", "aten", "npu_native_functions_by_codegen.yaml")
    ).npu_ops
    aten = aten_layer.parse_native_functions(cov.text("torch", "native_functions.yaml"), npu_ops)
    assert aten.overloads == {
        "matmul": "npu_kernel",
        "silu": "npu_kernel",
        "gelu": "npu_kernel_via_delegate",
        "gelu.out": "npu_kernel",
        "linear": "decomposes",
        "embedding_bag": "decomposes",
        "_embedding_bag": "npu_kernel",
        "mode": "cpu_fallback",
        "add.Tensor": "npu_kernel",
        "add.out": "cpu_fallback",
        "empty_like": "npu_kernel",
        "special_expm1": "decomposes",
        "to_sparse": "composite_explicit",
        "cross_entropy_loss": "decomposes",
    }
    # a base name is represented by its default overload, else its best functional overload
    assert aten.base_kernel["add"] == ("npu_kernel", "add.Tensor")
    assert aten.base_kernel["gelu"] == ("npu_kernel_via_delegate", "gelu")
    # python bindings: variants and python_module decide the public names; nn / private ones are skipped
    assert aten.bindings["torch.matmul"] == "matmul" and aten.bindings["torch.Tensor.matmul"] == "matmul"
    assert aten.bindings["torch.special.expm1"] == "special_expm1"
    assert aten.bindings["torch.Tensor.to_sparse"] == "to_sparse" and "torch.to_sparse" not in aten.bindings
    assert "torch.silu" not in aten.bindings and "torch._embedding_bag" not in aten.bindings
    assert aten.bindings["torch.embedding_bag"] == "embedding_bag"


def test_kernel_for_public_names(cov):
    npu_ops = aten_layer.parse_codegen_yaml(
        cov.text("wheel", "torch_npu", "csrc", "aten", "npu_native_functions_by_codegen.yaml")
    ).npu_ops
    aten = aten_layer.parse_native_functions(cov.text("torch", "native_functions.yaml"), npu_ops)
    assert aten_layer.kernel_for("torch.nn.functional.gelu", aten) == ("npu_kernel_via_delegate", "gelu")
    assert aten_layer.kernel_for("torch.nn.Linear", aten) == ("decomposes", "linear")
    assert aten_layer.kernel_for("torch.nn.functional.cross_entropy", aten) == ("decomposes", "cross_entropy_loss")
    assert aten_layer.kernel_for("torch.Tensor.add", aten) == ("npu_kernel", "add.Tensor")
    assert aten_layer.kernel_for("torch.cuda.synchronize", aten) == ("none", None)
    assert aten_layer.kernel_for("torch.nn.functional.normalize", aten) == ("unknown", None)


# -- docs markdown ---------------------------------------------------------------------------


def test_docs_rows(cov):
    rows = {r.name: r for r in docs_limits.parse_docs_md(cov.text("docs", "torch-mini.md"), "torch-mini.md")}
    assert set(rows) == {
        "torch.matmul", "torch.nn.functional.gelu", "torch.nn.functional.silu",
        "torch.nn.functional.embedding_bag", "torch.nn.Linear", "torch.Tensor.acos_", "torch.mode",
        "torch.__config__.show", "torch.backends.cudnn.benchmark", "torch.cuda.synchronize",
        "torch.cuda.CUDAGraph", "torch.cuda.CUDAGraph.replay", "torch.nn.DataParallel",
    }
    assert rows["torch.matmul"].support == {"A2": True, "A3": True, "950DT": False}
    assert rows["torch.matmul"].limit_lines == ["`input`仅支持fp16，fp32", "支持Named Tensor", "输入最大支持6维"]
    assert rows["torch.nn.functional.silu"].support == {"A2": True, "A3": True}  # &#10004;, no 950DT row
    assert rows["torch.nn.functional.silu"].limit_lines == ["`input`仅支持fp16，fp32"]  # inline limits
    assert rows["torch.cuda.synchronize"].npu_name == "torch_npu.npu.synchronize"
    # a member block ("> <font>replay()</font>") ends the class block and starts its own
    assert rows["torch.cuda.CUDAGraph"].limit_lines == ["当前仅支持推理场景，不支持训练场景"]
    assert rows["torch.cuda.CUDAGraph.replay"].limit_lines == []
    # code blocks are not limits
    assert all("import" not in line for line in rows["torch.mode"].limit_lines)
    assert len(rows["torch.mode"].limit_lines) == 3


@pytest.mark.parametrize(
    "line, expected",
    [
        ("`input`仅支持bf16，fp16，fp32", [("dtypes", "input", ["bf16", "fp16", "fp32"])]),
        ("`approximate`参数仅支持设置为`tanh`", [("frag", "approximate='tanh' only")]),
        ("可能回退至CPU执行", [("flag", "cpu_fallback"), ("frag", "may fall back to CPU execution")]),
        ("当前仅支持推理场景，不支持训练场景", [("flag", "inference_only"), ("frag", "inference only, training not supported")]),
        ("不支持fp64, complex64, complex128", [("exclude", ["fp64", "complex64", "complex128"])]),
        ("`dilation`的值目前在NPU上仅支持设置为1或(1,1)", [("frag", "dilation=1 or (1,1) only")]),
        ("支持Named Tensor", [("ignore",)]),
        ("这是一条没有翻译规则的限制说明", []),
    ],
)
def test_translate_limit_line(line, expected):
    assert docs_limits.translate_limit_line(line) == expected


def test_limits_per_soc():
    lim = docs_limits.analyse_limits([
        "`self`仅支持fp16，fp32，fp64",
        "<term>Atlas A3 训练系列产品</term>额外支持bf16",
        "<term>Ascend 950DT</term>：不支持fp64",
        "针对<term>Ascend 950DT</term>，输入为fp16时，精度可能和<term>Atlas A2 训练系列产品</term>/<term>Atlas A3 训练系列产品</term>存在差异",
        "<term>Atlas 训练系列产品</term>：`self`仅支持fp16",
        "`target`仅支持int64",
    ])
    assert lim.dtypes == {s: ["fp16", "fp32", "fp64"] for s in ("A2", "A3", "950DT")}
    assert lim.added["A3"] == {"bf16"} and lim.added["A2"] == set()
    assert lim.excluded["950DT"] == {"fp64"} and lim.excluded["A2"] == set()
    assert lim.flags["950DT"] == {"precision_differs"} and lim.flags["A2"] == set()
    assert lim.fragments["A2"] == ["target: int64 only"]
    assert all(lim.applies.values())


def test_no_prose_leaks_into_fragments():
    actions = docs_limits.translate_limit_line("`foo`仅支持中文的值")
    assert all(a[0] != "frag" for a in actions)


# -- python sources (ast) --------------------------------------------------------------------


def test_all_lists_and_exposed_api(cov):
    assert wheel_sources.parse_all_list(cov.text("wheel", "torch_npu", "npu", "__init__.py.txt"))[:2] == ["synchronize", "Event"]
    assert wheel_sources.parse_all_list(cov.text("torch", "cuda__init__.py.txt")) == [
        "CUDAGraph", "DoubleTensor", "Event", "amp", "get_arch_list", "nvtx", "synchronize",
    ]
    assert wheel_sources.parse_all_list("__all__ = ['a']\n__all__ += ['b']\n") == ["a", "b"]
    assert wheel_sources.parse_exposed_api(cov.text("wheel", "torch_npu", "utils", "exposed_api.py.txt")) == [
        "npu_format_cast", "npu_fusion_attention", "npu_rms_norm",
    ]


def test_transfer_to_npu(cov):
    t = wheel_sources.parse_transfer_to_npu(cov.text("wheel", "torch_npu", "contrib", "transfer_to_npu.py.txt"))
    assert t["module_patches"] == {"torch.cuda": "torch_npu.npu", "torch.cuda.amp": "torch_npu.npu.amp"}
    assert t["aliases"] == {
        "torch.Tensor.cuda": "torch.Tensor.npu",
        "torch.cuda.CUDAGraph": "torch.npu.NPUGraph",
        "torch.cuda.DoubleTensor": "torch.npu.FloatTensor",
        "torch.cuda.default_generators": "torch_npu.npu.default_generators",  # nested function
        "torch.distributed.is_nccl_available": "torch.distributed.is_hccl_available",
    }
    assert t["device_rule"] == [
        "torch.Tensor.new_zeros", "torch.Tensor.to", "torch.cuda.set_device", "torch.cuda.synchronize",
        "torch.distributed.init_process_group", "torch.fft.fftfreq", "torch.load", "torch.randn", "torch.zeros",
    ]
    assert t["hccl_rule"] == ["torch.distributed.init_process_group"]
    assert t["other_patches"] == {"torch.jit.script": "_jit_script"}
    assert t["device_kwargs"] == ["device", "map_location"]


def test_op_plugin_docs_products(cov):
    products = wheel_sources.parse_op_plugin_docs(cov.text("wheel", "torch_npu", "_op_plugin_docs.py.txt"))
    assert products == {"npu_fusion_attention": ["A2"], "npu_format_cast": ["A2", "A3", "950DT"], "npu_old_op": []}


def test_optimizer_signatures(cov):
    wheel = cov.mini_wheel()
    texts = {p[len("torch_npu/optim/"):-3]: t for p, t in wheel.items() if p.startswith("torch_npu/optim/")}
    sigs = wheel_sources.parse_optimizers(wheel["torch_npu/optim/__init__.py"], texts)
    assert sigs["NpuFusedAdamW"] == "NpuFusedAdamW(params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2, amsgrad=False)"
    assert sigs["NpuFusedSGD"] == "NpuFusedSGD(params, lr=required, momentum=0.0, weight_decay=0.0, *, nesterov=False)"


# -- derivatives.yaml ------------------------------------------------------------------------


def test_derivatives_version_filter(cov):
    text = cov.text("derivatives.yaml")
    v214 = wheel_sources.parse_derivatives(text, "v2.14")
    assert v214 == {
        "gather": ["self", "index"],
        "npu_fusion_attention": ["query", "key", "value", "pse"],
        "npu_rms_norm": ["self", "gamma"],
    }
    v21 = wheel_sources.parse_derivatives(text, "v2.1")
    assert set(v21) == {"npu_fusion_attention", "npu_rms_norm", "npu_old_op", "npu_format_cast"}


def test_sources_md():
    row = "| `ascend-op-plugin/derivatives.yaml` | GitHub Ascend/op-plugin | `" + "a" * 40 + "` | `op_plugin/config/derivatives.yaml` | BSD-3-Clause | 29111 | `" + "b" * 64 + "` |"
    parsed = wheel_sources.parse_sources_md("# x\n\n| file | ... |\n|---|---|\n" + row + "\n")
    assert parsed == {
        "ascend-op-plugin/derivatives.yaml": {
            "upstream": "GitHub Ascend/op-plugin", "commit": "a" * 40,
            "path": "op_plugin/config/derivatives.yaml", "licence": "BSD-3-Clause", "sha256": "b" * 64,
        }
    }


# -- the builder -----------------------------------------------------------------------------


def test_build_table_on_fixtures(mini_table):
    e = mini_table["entries"]
    assert e["torch.matmul"]["status"] == {"A2": "partial", "A3": "partial", "950DT": "unsupported"}
    assert e["torch.matmul"]["dtypes"] == ["fp16", "fp32"]
    assert e["torch.matmul"]["bf16_undocumented"] == ["A2", "A3"]
    assert e["torch.matmul"]["soc_flags"] == {"950DT": ["doc_kernel_conflict"]}
    assert e["torch.matmul"]["limits"] == ["at most 6 input dims"]
    assert e["torch.nn.functional.gelu"]["limits"] == ["approximate='tanh' only"]
    assert "bf16_undocumented" not in e["torch.nn.functional.gelu"]
    assert e["torch.nn.functional.silu"]["status"] == {"A2": "partial", "A3": "partial", "950DT": "unverified"}
    assert e["torch.nn.functional.embedding_bag"]["status"] == "unsupported"
    assert e["torch.nn.Linear"]["kernel"] == "decomposes"
    assert e["torch.nn.Linear"]["soc_flags"] == {"950DT": ["precision_differs"]}
    assert e["torch.Tensor.acos_"]["soc_dtypes"] == {"A3": ["bf16", "fp16", "fp32", "fp64"]}
    assert e["torch.nn.Linear"]["soc_dtypes_excluded"] == {"950DT": ["fp64"]}
    assert e["torch.mode"]["status"] == "partial"
    assert e["torch.mode"]["flags"] == ["cpu_fallback"] and e["torch.mode"]["more_limits"] == 1
    assert e["torch.mode"]["limits"] == ["may fall back to CPU execution", "fp16 not supported with dim"]
    assert e["torch.__config__.show"]["status"] == "supported"
    bench = e["torch.backends.cudnn.benchmark"]
    assert bench["ignored_dtypes"] == ["fp32"] and "dtypes" not in bench
    assert bench["status"] == {"A2": "supported", "A3": "supported", "950DT": "unsupported"}
    assert e["torch.cuda.synchronize"]["npu_name"] == "torch.npu.synchronize"
    assert {"device_rule", "transfer_to_npu"} <= set(e["torch.cuda.synchronize"]["flags"])
    assert e["torch.cuda.CUDAGraph"]["npu_name"] == "torch.npu.NPUGraph"
    assert e["torch.cuda.CUDAGraph"]["flags"] == ["inference_only", "transfer_to_npu"]
    assert e["torch.cuda.DoubleTensor"]["npu_name"] == "torch.npu.FloatTensor"
    assert "precision_change" in e["torch.cuda.DoubleTensor"]["flags"]
    assert e["torch.cuda.amp.autocast"]["npu_name"] == "torch.npu.amp.autocast"
    assert e["torch.cuda.nvtx"]["status"] == "unsupported"
    assert e["torch.cuda.get_arch_list"]["status"] == "unsupported"
    assert "torch.cuda.set_compile_mode" not in e  # NPU-only name
    assert e["torch.npu.set_compile_mode"]["flags"] == ["npu_native"]
    assert e["torch.Tensor.cuda"]["npu_name"] == "torch.Tensor.npu"
    # unlisted public ATen names
    assert e["torch.Tensor.mode"]["status"] == "cpu_fallback"
    assert e["torch.special.expm1"]["status"] == "unverified"
    # custom ops and optimizers
    fa = e["torch_npu.npu_fusion_attention"]
    assert fa["status"] == {"A2": "supported", "A3": "unverified", "950DT": "unverified"}
    assert {"autograd", "public", "nondeterministic_seeded"} <= set(fa["flags"])
    assert "autograd: gradients for query, key, value, pse" in fa["limits"]
    assert "autograd" not in e["torch_npu.npu_format_cast"].get("flags", [])  # v2.1 only
    assert e["torch_npu.npu_format_cast"]["status"] == "supported"
    assert e["torch_npu.npu_old_op"]["status"] == "unverified"
    assert "public" not in e["torch_npu.npu_fusion_attention_grad"].get("flags", [])
    assert "torch_npu.optim.NpuFusedOptimizerBase" not in e
    assert e["torch_npu.optim.NpuFusedAdamW"]["signature"].startswith("NpuFusedAdamW(params, lr=1e-3")


def test_build_is_deterministic_and_schema_valid(gen, cov, mini_table):
    jsonschema = pytest.importorskip("jsonschema")
    first = table_output.dump_table(mini_table)
    second = table_output.dump_table(table_build.build_table(cov.mini_inputs()))
    assert first == second
    assert first.endswith(b"\n") and first.isascii()
    schema = json.loads(cov.SCHEMA.read_text())
    jsonschema.Draft202012Validator(schema).validate(json.loads(first))


def test_counts_header(mini_table):
    counts = mini_table["counts"]
    assert counts["entries"] == len(mini_table["entries"])
    for _soc, by_status in counts["status_by_soc"].items():
        assert sum(by_status.values()) == counts["entries"]
    assert counts["aten_by_kernel"] == {
        "npu_kernel": 6, "npu_kernel_via_delegate": 1, "decomposes": 4, "composite_explicit": 1, "cpu_fallback": 2,
    }


# -- wheel handling ------------------------------------------------------------------------


def test_wheel_sha256_mismatch_is_refused(tmp_path):
    fake = tmp_path / facts.WHEEL_FILE
    with zipfile.ZipFile(fake, "w") as zf:
        zf.writestr("torch_npu/__init__.py", "")
    with pytest.raises(facts.GenerationError, match="does not match the pinned"):
        real_inputs.ensure_wheel(None, tmp_path, offline=True)


def test_missing_wheel_offline_is_refused(tmp_path):
    with pytest.raises(facts.GenerationError, match="not found"):
        real_inputs.ensure_wheel(None, tmp_path, offline=True)


def test_read_wheel_requires_members(tmp_path):
    fake = tmp_path / "x.whl"
    with zipfile.ZipFile(fake, "w") as zf:
        zf.writestr("torch_npu/__init__.py", "")
    with pytest.raises(facts.GenerationError, match="lacks"):
        real_inputs.read_wheel(fake)


def test_read_wheel_reads_members_only(cov, tmp_path):
    path = tmp_path / "mini.whl"
    wheel = cov.mini_wheel()
    with zipfile.ZipFile(path, "w") as zf:
        for name, text in sorted(wheel.items()):
            zf.writestr(name, text)
        zf.writestr("torch_npu/lib/libtorch_npu.so", b"\x7fELF")
    texts, shas = real_inputs.read_wheel(path)
    assert "torch_npu/lib/libtorch_npu.so" not in texts
    assert texts[facts.WHEEL_TRANSFER] == wheel[facts.WHEEL_TRANSFER]
    assert set(shas) == {facts.WHEEL_CODEGEN, facts.WHEEL_EXPOSED, facts.WHEEL_NPU_INIT, facts.WHEEL_TRANSFER,
                         facts.WHEEL_OP_DOCS, facts.WHEEL_OPTIM_INIT}


# -- the command line, on a fake shared-data snapshot ----------------------------------------


def _fake_snapshot(cov, root):
    import hashlib

    docs = root / facts.DOCS_DIR
    docs.mkdir(parents=True)
    (docs / "torch-mini.md").write_text(cov.text("docs", "torch-mini.md"), encoding="utf-8")
    deriv = root / facts.DERIVATIVES_FILE
    deriv.parent.mkdir(parents=True)
    deriv.write_text(cov.text("derivatives.yaml"), encoding="utf-8")
    rows = ["| file | upstream | commit | original path | licence | bytes | sha256 |", "|---|---|---|---|---|---|---|"]
    for rel, commit in ((f"{facts.DOCS_DIR}/torch-mini.md", "a" * 40), (facts.DERIVATIVES_FILE, "b" * 40)):
        data = (root / rel).read_bytes()
        rows.append(f"| `{rel}` | GitHub x/y | `{commit}` | `{rel}` | CC BY 4.0 | {len(data)} | `{hashlib.sha256(data).hexdigest()}` |")
    (root / "SOURCES.md").write_text("# Sources\n\n" + "\n".join(rows) + "\n", encoding="utf-8")


def test_main_writes_checks_and_refuses_modified_snapshot(gen, cov, tmp_path, monkeypatch, capsys):
    shared = tmp_path / "shared"
    _fake_snapshot(cov, shared)
    monkeypatch.setattr(real_inputs, "ensure_wheel", lambda wheel, cache, offline: tmp_path / "fake.whl")
    monkeypatch.setattr(real_inputs, "read_wheel", lambda path: (cov.mini_wheel(), {facts.WHEEL_CODEGEN: "0" * 64}))
    args = [
        "--shared-data", str(shared), "--output-dir", str(tmp_path / "out"), "--offline",
        "--native-functions", str(cov.FIXTURES / "torch" / "native_functions.yaml"),
        "--torch-cuda-init", str(cov.FIXTURES / "torch" / "cuda__init__.py.txt"),
    ]
    # unpinned torch inputs are refused unless explicitly allowed
    assert gen.main(args) == 2
    assert "differs from the pinned torch" in capsys.readouterr().err
    args.append("--allow-unpinned-torch")
    assert gen.main(args) == 0
    table = json.loads((tmp_path / "out" / gen.output_name()).read_bytes())
    assert table["inputs"]["ascend_pytorch_docs"]["commit"] == "a" * 40
    assert table["inputs"]["op_plugin_derivatives"]["commit"] == "b" * 40
    assert table["sources"]["docs:torch-mini.md"].endswith("@aaaaaaa (CC BY 4.0)")
    assert gen.main(args + ["--check"]) == 0
    # a modified snapshot file is refused
    doc = shared / facts.DOCS_DIR / "torch-mini.md"
    doc.write_text(doc.read_text(encoding="utf-8") + "\n", encoding="utf-8")
    assert gen.main(args) == 2
    assert "snapshot was modified" in capsys.readouterr().err
