"""The repository's own CUDA extensions (issue 41 item 5): inventory, KERN021 per binding use, known
equivalents with their sources, the route to a PyTorch reference or a CPU branch, and KERN003 effort per
kernel. The fixture tree is tests/fixtures/kernels/extension_repo (its findings: extension_repo.txt)."""

from __future__ import annotations

import ast
import shutil
import textwrap
from pathlib import Path

import pytest

from migrator import api
from migrator.engine import cpp_source
from migrator.engine.extension_decls import declarations
from migrator.engine.extension_facts import (
    EQUIVALENT_MINUTES,
    PORT_BASE,
    PORT_CAP,
    PORT_PER_LINE,
    REFERENCE_MINUTES,
    kernel_minutes,
)
from migrator.engine.extension_inventory import build, known_for, known_kernels
from migrator.reporters import effort

REPO = Path(__file__).resolve().parents[1] / "fixtures" / "kernels" / "extension_repo"


@pytest.fixture(scope="module")
def scanned():
    return api.scan([REPO], root=REPO, use_cache=False)


def _by(result, code):
    return [f for f in result.findings if f.code == code]


def test_one_finding_per_binding_use_naming_extension_binding_and_kernels(scanned):
    calls = {(f.path, f.line): f for f in _by(scanned, "KERN021")}
    assert sorted(calls) == [("vision_ext/layers.py", 8), ("vision_ext/layers.py", 13), ("vision_ext/ops.py", 11),
                             ("vision_ext/ops.py", 15), ("vision_ext/ops.py", 19)]
    roi = calls[("vision_ext/ops.py", 11)]
    assert roi.symbol == "vision_ext._C.roi_align"
    assert "`roi_align`" in roi.message and "`vision_ext._C`" in roi.message and "`RoIAlignForward`" in roi.message
    assert calls[("vision_ext/ops.py", 19)].symbol == "torch.ops.vision_ext.roi_align_op"  # TORCH_LIBRARY op
    assert "`RoIAlignForward`" in calls[("vision_ext/ops.py", 19)].message  # through TORCH_LIBRARY_IMPL's m.impl
    unknown = calls[("vision_ext/layers.py", 8)]  # `from vision_ext._C import segment_reduce`
    assert unknown.symbol == "vision_ext._C.segment_reduce"
    assert "`segment_reduce_kernel`" in unknown.message and "no known equivalent or reference" in unknown.message


def test_known_kernel_names_its_equivalent_and_source(scanned):
    roi = next(f for f in _by(scanned, "KERN021") if f.symbol == "vision_ext._C.roi_align")
    row = known_for("vision_ext._C", "roi_align")
    assert row is not None and row.kind == "equivalent"
    assert f"use instead {row.use}" in roi.message and row.sources[0] in roi.message
    assert "torchvision.ops.roi_align" in row.use


def test_reference_twin_and_cuda_branch_are_the_route(scanned):
    swish = [f for f in _by(scanned, "KERN021") if f.symbol == "vision_ext._C.fused_swish"]
    assert len(swish) == 2
    assert all("a PyTorch reference exists at vision_ext/ops.py:6: route the NPU path to it" in f.message for f in swish)
    in_branch = next(f for f in swish if f.path == "vision_ext/layers.py")
    assert "the other branch (line 14) is the fallback" in in_branch.message
    outside = next(f for f in swish if f.path == "vision_ext/ops.py")
    assert "CUDA-only branch" not in outside.message


def test_kernel_effort_by_what_is_left_and_by_size(scanned):
    cu = {f.path: f for f in _by(scanned, "KERN003")}
    both = cu["vision_ext/csrc/kernels.cu"]  # RoIAlign: a known equivalent; swish: a reference twin
    assert both.effort is not None and both.effort.minutes == EQUIVALENT_MINUTES + REFERENCE_MINUTES
    assert "`RoIAlignForward`" in both.message and "equivalent" in both.message
    assert "`swish_kernel`" in both.message and "reference" in both.message
    port = cu["vision_ext/csrc/extra.cu"]  # reached only by the unknown binding: by size (6 body lines)
    assert port.effort is not None and port.effort.minutes == PORT_BASE + PORT_PER_LINE * 6
    assert "`segment_reduce_kernel` (6 lines, port" in port.message


def test_effort_counts_each_binding_once_and_each_cuda_file_by_its_kernels(scanned):
    acts = effort.actions(scanned.findings)
    calls = [a for a in acts if a.code == "KERN021"]
    assert len(calls) == 4  # five sites, four bindings (fused_swish twice)
    assert {a.unit for a in calls} == {"symbol"}
    files = {a.first.path: a.minutes for a in acts if a.code == "KERN003"}
    assert files["vision_ext/csrc/kernels.cu"] == EQUIVALENT_MINUTES + REFERENCE_MINUTES
    assert effort.to_json(scanned.findings)["minutes"] == sum(a.minutes for a in acts)


def test_kernel_minutes_formula():
    assert kernel_minutes("equivalent", 500) == EQUIVALENT_MINUTES
    assert kernel_minutes("reference", 500) == REFERENCE_MINUTES
    assert kernel_minutes("port", 60) == PORT_BASE + PORT_PER_LINE * 60
    assert kernel_minutes("port", 100_000) == PORT_CAP


def test_inventory_of_the_fixture():
    inventory = build(REPO, ["setup.py", "vision_ext/__init__.py", "vision_ext/ops.py", "vision_ext/layers.py"])
    (ext,) = inventory.extensions
    assert ext.decl.name == "vision_ext._C" and not ext.decl.partial
    assert sorted(k.name for k in ext.kernels) == ["RoIAlignForward", "segment_reduce_kernel", "swish_kernel"]
    by_name = {b.name: b for b in ext.bindings}
    assert sorted(by_name) == ["fused_swish", "roi_align", "roi_align_op", "segment_reduce"]
    assert by_name["fused_swish"].reference == "vision_ext/ops.py:6"
    assert by_name["roi_align_op"].module == "torch.ops.vision_ext"


def test_cpp_reader_skips_comments_and_strings():
    text = textwrap.dedent('''\
        // a { in a comment
        /* and } here */
        const char* s = "{ not a block";
        namespace ops {
        __global__ void k(float* x) { x[0] = 1.f; }
        void launch() { k<<<1, 1>>>(nullptr); }
        }
        PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) { m.def("run", &launch, "doc {"); }
        TORCH_LIBRARY_IMPL(ns, CUDA, m) { m.impl(TORCH_SELECTIVE_NAME("ns::op"), TORCH_FN(launch)); }
    ''')
    functions = {f.name: f for f in cpp_source.functions(text)}
    assert set(functions) == {"k", "launch"} and functions["k"].is_kernel and not functions["launch"].is_kernel
    bindings = cpp_source.bindings(text)
    assert [(b.name, b.target, b.kind) for b in bindings] == [("run", "launch", "pybind"), ("op", "launch", "impl")]
    by_name = {name: [fn] for name, fn in functions.items()}
    assert cpp_source.reached_kernels("launch", by_name) == {"k"}


def test_setup_sources_through_globs_and_a_variable_extension_class(tmp_path):
    (tmp_path / "pkg" / "csrc").mkdir(parents=True)
    for name in ("vision.cpp", "roi.cu"):
        (tmp_path / "pkg" / "csrc" / name).write_text("")
    setup = textwrap.dedent('''\
        import glob, os
        from torch.utils.cpp_extension import CUDAExtension, CppExtension
        def get_extensions():
            here = os.path.dirname(os.path.abspath(__file__))
            src = os.path.join(here, "pkg", "csrc")
            sources = glob.glob(os.path.join(src, "*.cpp"))
            extension = CppExtension
            if True:
                extension = CUDAExtension
                sources += glob.glob(os.path.join(src, "*.cu"))
            return [extension("pkg._C", sources)]
    ''')
    (decl,) = declarations(ast.parse(setup), "setup.py", str(tmp_path))
    assert decl.name == "pkg._C" and not decl.partial
    assert sorted(decl.sources) == ["pkg/csrc/roi.cu", "pkg/csrc/vision.cpp"]


def test_load_bound_module_used_in_its_file_and_imported_elsewhere(tmp_path):
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("")
    (tmp_path / "pkg" / "k.cu").write_text(
        "__global__ void scale_kernel(float* x) { x[0] *= 2.f; }\n"
        "void scale(float* x) { scale_kernel<<<1, 1>>>(x); }\n"
        'PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) { m.def("scale", &scale); }\n')
    (tmp_path / "pkg" / "ops.py").write_text(textwrap.dedent('''\
        import os
        from torch.utils.cpp_extension import load
        _C = load(name="scale_ext", sources=[os.path.join(os.path.dirname(__file__), "k.cu")])
        def scale(x):
            return _C.scale(x)
    '''))
    (tmp_path / "pkg" / "model.py").write_text("from pkg.ops import _C\n\ny = _C.scale(1)\n")
    result = api.scan([tmp_path], root=tmp_path, use_cache=False)
    calls = sorted((f.path, f.line, f.symbol) for f in _by(result, "KERN021"))
    assert calls == [("pkg/model.py", 3, "scale_ext.scale"), ("pkg/ops.py", 5, "scale_ext.scale")]
    assert all("`scale_kernel`" in f.message for f in _by(result, "KERN021"))


def test_every_call_on_a_cuda_extension_is_a_site_even_where_no_binding_was_read(tmp_path):
    """fairseq 0.12.2's sdist declares CUDA extensions whose sources it does not ship; flash-attn 2.7.4 calls
    `fused_dense_cuda.linear_bias_forward`, which its extension does not bind. A C++ (CPU) extension's calls
    stay no KERN021."""
    (tmp_path / "csrc").mkdir()
    (tmp_path / "csrc" / "k.cu").write_text(
        "__global__ void scale_kernel(float* x) { x[0] *= 2.f; }\n"
        "void scale(float* x) { scale_kernel<<<1, 1>>>(x); }\n"
        'PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) { m.def("scale", &scale); }\n')
    (tmp_path / "setup.py").write_text(textwrap.dedent('''\
        from setuptools import setup
        from torch.utils.cpp_extension import CppExtension, CUDAExtension
        setup(ext_modules=[CUDAExtension("scale_ext", ["csrc/k.cu"]),
                           CUDAExtension("absent_cuda", ["csrc/absent.cpp", "csrc/absent_kernel.cu"]),
                           CppExtension("cpu_ext", ["csrc/cpu.cpp"])])
    '''))
    (tmp_path / "model.py").write_text(textwrap.dedent('''\
        import absent_cuda
        import cpu_ext
        import scale_ext as fast
        y = fast.scale(1) + fast.stale(2) + absent_cuda.fwd(3) + cpu_ext.edit_distance(4)
    '''))
    result = api.scan([tmp_path], root=tmp_path, use_cache=False)
    calls = {f.symbol: f for f in _by(result, "KERN021")}
    assert sorted(calls) == ["absent_cuda.fwd", "scale_ext.scale", "scale_ext.stale"]
    assert all(f.line == 4 for f in calls.values())
    assert "`scale_kernel`" in calls["scale_ext.scale"].message
    for unread in ("absent_cuda.fwd", "scale_ext.stale"):
        assert "no binding of that name was read from its C++ sources" in calls[unread].message


def test_tree_without_cuda_sources_gets_no_call_findings(tmp_path):
    shutil.copytree(REPO, tmp_path / "repo")
    for cu in (tmp_path / "repo").rglob("*.cu"):
        cu.unlink()
    result = api.scan([tmp_path / "repo"], root=tmp_path / "repo", use_cache=False)
    assert _by(result, "KERN021") == []


def test_broken_setup_and_binary_cuda_file_do_not_stop_the_scan(tmp_path):
    (tmp_path / "setup.py").write_text("from torch.utils.cpp_extension import CUDAExtension\nsetup(ext_modules=[\n")
    (tmp_path / "k.cu").write_bytes(b"__global__ void k() {}\n\xff\xfe\x00")
    result = api.scan([tmp_path], root=tmp_path, use_cache=False)
    assert any(f.code == "MIG001" or f.family == "meta" for f in result.findings)  # the parse error, named
    assert _by(result, "KERN021") == []


def test_known_kernel_table_rows_are_sourced():
    rows = known_kernels()
    assert len(rows) >= 6
    for row in rows:
        assert row.sources and all(s.startswith("https://") for s in row.sources), row.kernel
        assert row.kind in ("equivalent", "reference") and row.use
    assert known_for("detectron2._C", "nms").kernel == "nms"
    assert known_for("mmcv._ext", "nms_rotated") is None  # a rotated NMS is not torchvision's
    assert known_for("fused_layer_norm_cuda", "rms_forward_affine").kernel == "rms_norm"
    assert known_for("selective_scan_cuda", "fwd").kind == "reference"


def test_dispatch_through_a_registry_and_a_kernel_pointer_reaches_the_kernel():
    """mmcv registers the CUDA implementation under a key the binding dispatches on; flash-attn-style
    launchers take the kernel's address before launching it."""
    text = textwrap.dedent('''\
        template <typename T> __global__ void roi_kernel(T* x) { x[0] = 0; }
        template <typename T> void launch(T* x) { auto kernel = &roi_kernel<T>; kernel<<<1, 1>>>(x); }
        void roi_align_forward_cuda(float* x) { launch<float>(x); }
        REGISTER_DEVICE_IMPL(roi_align_forward_impl, CUDA, roi_align_forward_cuda);
        void roi_align_forward(float* x) { DISPATCH_DEVICE_IMPL(roi_align_forward_impl, x); }
    ''')
    by_name: dict[str, list[cpp_source.CppFunction]] = {}
    for fn in cpp_source.functions(text):
        by_name.setdefault(fn.name, []).append(fn)
    assert cpp_source.reached_kernels("roi_align_forward", by_name) == {"roi_kernel"}
    assert cpp_source.reached_kernels("launch", by_name) == {"roi_kernel"}


def test_a_kernel_defined_through_a_macro_is_a_kernel_and_reached():
    """flash-attn 2.7.4's csrc/flash_attn/src/flash_fwd_launch_template.h defines its kernels this way."""
    text = textwrap.dedent('''\
        #define DEFINE_FLASH_FORWARD_KERNEL(kernelName, ...) \\
        template<typename Kernel_traits, __VA_ARGS__> \\
        __global__ void kernelName(const Flash_fwd_params params)

        DEFINE_FLASH_FORWARD_KERNEL(flash_fwd_kernel, bool Is_dropout, bool Is_causal) {
            compute_attn<Kernel_traits, Is_dropout, Is_causal>(params);
        }

        template<typename Kernel_traits, bool Is_dropout>
        void run_flash_fwd(Flash_fwd_params &params) {
            auto kernel = &flash_fwd_kernel<Kernel_traits, Is_dropout, false>;
            kernel<<<1, 128>>>(params);
        }
    ''')
    found = {f.name: f for f in cpp_source.functions(text)}
    assert found["flash_fwd_kernel"].is_kernel and found["flash_fwd_kernel"].line == 5
    assert "DEFINE_FLASH_FORWARD_KERNEL" not in found
    assert cpp_source.reached_kernels("run_flash_fwd", {n: [f] for n, f in found.items()}) == {"flash_fwd_kernel"}
