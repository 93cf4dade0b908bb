"""Issue 39 item 5: CUDA uses the scan missed on real trees, one class per test (repro first, then the
mechanism): every use of a CUDA-only library's names is a site (`scope: library`), at any scope and however
the module was bound; distinct sites are never merged; names used as values are uses."""

from __future__ import annotations

from pathlib import Path

from migrator import api
from migrator.reporters.effort import actions


def _scan(tmp_path: Path, text: str, name: str = "m.py"):
    (tmp_path / name).write_text(text)
    return api.scan([tmp_path / name], root=tmp_path, use_cache=False)


def _sites(result) -> list[tuple[int, str, str]]:
    return sorted((f.line, f.code, f.symbol) for f in result.findings)


def test_a_second_identical_use_in_one_function_is_its_own_site(tmp_path):
    result = _scan(tmp_path, (
        "import transformer_engine as te\n\n\ndef step(model):\n"
        "    with te.pytorch.fp8_autocast():\n        model()\n"
        "    with te.pytorch.fp8_autocast():\n        model()\n"))
    uses = [line for line, code, symbol in _sites(result) if symbol == "transformer_engine.pytorch.fp8_autocast"]
    assert uses == [5, 7]


def test_a_module_bound_under_another_path_reports_its_uses(tmp_path):
    result = _scan(tmp_path, (
        "import flash_attn.flash_attn_triton as fat\nfrom flash_attn import flash_attn_triton\n\n\n"
        "def attend(q, k, v):\n    a = fat.attention(q, k, v)\n"
        "    return a, flash_attn_triton.flash_attn_func(q, k, v)\n"))
    assert (6, "ATTN009", "flash_attn.flash_attn_triton.attention") in _sites(result)
    assert (7, "ATTN009", "flash_attn.flash_attn_triton.flash_attn_func") in _sites(result)


def test_a_function_local_import_reports_its_uses(tmp_path):
    result = _scan(tmp_path, (
        "def gpus():\n    import pynvml\n    pynvml.nvmlInit()\n    return pynvml.nvmlDeviceGetCount()\n\n\n"
        "def optimizer_manager():\n    from bitsandbytes.optim import GlobalOptimManager\n"
        "    return GlobalOptimManager.get_instance()\n"))
    assert [(line, code) for line, code, _ in _sites(result)] == [
        (2, "KERN008"), (3, "KERN008"), (4, "KERN008"), (8, "KERN006"), (9, "KERN006")]


def test_a_member_the_table_does_not_list_is_a_finding_of_its_library(tmp_path):
    result = _scan(tmp_path, (
        "import xformers\nimport torch\n\n"
        "mask = xformers.ops.fmha.attn_bias.BlockDiagonalCausalMask.from_seqlens([3, 4])\n"
        "out = torch.ops.xformers.sparse24_largest_mask_2d(torch.ones(4, 4))\n"))
    assert (4, "ATTN019", "xformers.ops.fmha.attn_bias.BlockDiagonalCausalMask.from_seqlens") in _sites(result)
    assert (5, "ATTN019", "torch.ops.xformers.sparse24_largest_mask_2d") in _sites(result)


def test_vllm_cuda_attention_backends_are_reported(tmp_path):
    result = _scan(tmp_path, (
        "from vllm.attention.backends.flash_attn import FlashAttentionBackend\n"
        "from vllm.vllm_flash_attn import flash_attn_varlen_func\n"
        "from vllm.attention.selector import get_attn_backend\n\n"
        "backend = FlashAttentionBackend.get_name()\nout = flash_attn_varlen_func(q, k, v)\n"))
    assert [(line, code) for line, code, _ in _sites(result)] == [(1, "ATTN012"), (2, "ATTN012"), (5, "ATTN012"),
                                                                  (6, "ATTN012")]


def test_flash_attn_functions_returned_or_chosen_as_values_are_uses(tmp_path):
    result = _scan(tmp_path, (
        "import flash_attn\nfrom flash_attn import flash_attn_func, flash_attn_varlen_func\n\n\n"
        "def pick(varlen):\n    attn_fn = flash_attn_varlen_func if varlen else flash_attn_func\n    return attn_fn\n\n\n"
        "def default():\n    return flash_attn_func\n\n\n"
        "def by_module():\n    return flash_attn.flash_attn_varlen_func\n"))
    sites = [(line, code) for line, code, _ in _sites(result)]
    assert (6, "ATTN002") in sites and (6, "ATTN001") in sites
    assert (11, "ATTN001") in sites and (15, "ATTN002") in sites
    assert all(f.fix is None for f in result.findings if f.line in (6, 11, 15))  # a value is ported by hand


def test_library_uses_cost_no_more_than_the_library_import(tmp_path):
    """Every use is a site, but porting the library is one action with its import (the minutes do not grow with
    the number of calls); a use in a file that imports the library only optionally goes with that import."""
    one = _scan(tmp_path, "import pynvml\npynvml.nvmlInit()\n", "one.py")
    many = _scan(tmp_path, "import pynvml\n" + "pynvml.nvmlInit()\n" * 5, "many.py")
    assert len(many.findings) == 6
    assert [(a.code, a.unit, a.minutes) for a in actions(many.findings)] == [
        (a.code, a.unit, a.minutes) for a in actions(one.findings)]
    guarded = _scan(tmp_path, "try:\n    import pynvml\nexcept ImportError:\n    pynvml = None\n"
                              "if pynvml:\n    pynvml.nvmlInit()\n", "guarded.py")
    assert [f.line for f in guarded.findings] == [2, 5, 6]
    assert actions(guarded.findings) == []


def test_triton_utilities_stay_with_the_import_and_kernels(tmp_path):
    """Triton keeps `scope: imports`: upstream triton's host utilities run under triton-ascend (the same module);
    the import and each kernel are the findings, the kernel's constructs have rules of their own."""
    result = _scan(tmp_path, (
        "import triton\nimport triton.language as tl\n\n\n@triton.jit\ndef k(x_ptr, n: tl.constexpr):\n"
        "    tl.store(x_ptr, tl.load(x_ptr))\n\n\ngrid = (triton.cdiv(1024, 128),)\n"))
    assert [(line, code) for line, code, _ in _sites(result)] == [(1, "KERN004"), (2, "KERN004"), (5, "KERN004")]


def test_a_triton_kernel_made_by_a_call_is_reported_like_a_decorated_one(tmp_path):
    result = _scan(tmp_path, (
        "import triton\n\n\ndef body(x):\n    return x\n\n\n"
        "kernel = triton.jit(body)\ntuned = triton.autotune(configs=[], key=[])(kernel)\n"))
    assert [(line, code) for line, code, _ in _sites(result)] == [(1, "KERN004"), (8, "KERN004"), (9, "KERN004")]


EXTENSION_CLASS = (
    "import glob\nfrom torch.utils.cpp_extension import CUDAExtension\n\n\n"
    "class MoeCudaExtension:\n    def sources_files(self):\n"
    "        return [self.csrc_abs_path(f) for f in [\"kernel/cuda/moe_kernel.cu\", \"kernel/cuda/moe_utils.cuh\"]]\n\n"
    "    def build(self):\n        return CUDAExtension(\"moe\", self.sources_files())\n\n\n"
    "cuda_sources = glob.glob(\"csrc/**/*.cu\", recursive=True)\nhip = [f.replace(\".cpp\", \".cu\") for f in cuda_sources]\n"
    "generated = f\"{name}.cu\"\nnot_cuda = [\"README.cuda.md\", \"kernel.cuda.cpp\", \"cuda\"[:0]]\n")


def test_strings_naming_cuda_sources_are_notes_that_add_no_effort(tmp_path):
    """ColossalAI's extension classes return their `.cu` lists from a method, xformers' setup.py globs "*.cu":
    each string is a KERN023 note; the extension's work stays its build's (KERN001) and its `.cu` files'."""
    result = _scan(tmp_path, EXTENSION_CLASS)
    notes = [(f.line, f.symbol) for f in result.findings if f.code == "KERN023"]
    assert notes == [(7, "kernel/cuda/moe_kernel.cu"), (7, "kernel/cuda/moe_utils.cuh"), (13, "csrc/**/*.cu"),
                     (14, ".cu"), (15, "{}.cu")]
    assert {f.severity for f in result.findings if f.code == "KERN023"} == {"info"}
    without = _scan(tmp_path, EXTENSION_CLASS.replace(".cu", ".cpp"), "without.py")
    assert not any(f.code == "KERN023" for f in without.findings)
    assert [(a.code, a.minutes) for a in actions(result.findings)] == [
        (a.code, a.minutes) for a in actions(without.findings)] != []


def test_cuda_sources_inside_a_run_time_build_are_that_builds_finding(tmp_path):
    result = _scan(tmp_path, (
        "from torch.utils.cpp_extension import load\n"
        "ext = load(\"ext\", sources=[\n    \"ext.cpp\",\n    \"ext_kernel.cu\",\n])\n"))
    assert [(f.code, f.line, f.end_line) for f in result.findings if f.family == "kernels"] == [("KERN002", 2, 5)]
    assert not any(f.code == "KERN023" for f in result.findings)


def test_parrots_cuda_builds_are_cuda_extension_classes(tmp_path):
    """mmengine's parrots wrappers: parrots' CUDA_HOME and `Extension(cuda=True)`, bound as a partial or called."""
    result = _scan(tmp_path, (
        "from functools import partial\n\n\ndef get_extension():\n"
        "    from parrots.utils.build_extension import CUDA_HOME, BuildExtension, Extension\n"
        "    CppExtension = partial(Extension, cuda=False)\n    CUDAExtension = partial(Extension, cuda=True)\n"
        "    return Extension(\"ops\", [\"ops.cpp\"], cuda=True), CUDA_HOME\n"))
    assert [(line, code) for line, code, _ in _sites(result)] == [(5, "KERN001"), (7, "KERN001"), (8, "KERN001"),
                                                                  (8, "KERN001")]


def test_device_names_in_bytes_literals_are_reported_and_left_to_a_person(tmp_path):
    """ColossalAI's p2p patches `b"cuda"` inside pickled buffers; `b"npu"` is a byte shorter than `b"cuda"`,
    so the offsets around it (`find(b"cuda") + 5`) would break: manual, with that reason."""
    result = _scan(tmp_path, (
        "import re\n\n\ndef unpickle(buf, index):\n    if b\"cuda\" in buf:\n"
        "        buf = bytearray(buf)\n        for m in re.finditer(b\"cuda\", buf):\n"
        "            buf[m.start() + 5] = 48 + index\n        buf[buf.find(b\"cuda:0\") + 5] = 48\n    return buf\n"))
    found = [f for f in result.findings if f.code == "DEV012"]
    assert [f.line for f in found] == [5, 7, 9]
    assert all(f.fix is None and "bytes literal" in (f.declined or "") for f in found)
    listed = _scan(tmp_path, "from torch.utils.cpp_extension import CUDAExtension\n"
                              "ext = CUDAExtension(\n    \"ext\",\n    sources=[\"a.cpp\", \"a_kernel.cu\"],\n)\n", "setup.py")
    assert [(f.code, f.line) for f in listed.findings] == [("KERN001", 1), ("KERN001", 2), ("KERN023", 4)]


def test_a_module_bound_by_a_call_naming_it_reports_its_uses(tmp_path):
    """MONAI binds CuPy and NVML through its own `optional_import("cupy")`; `importlib.import_module` alike."""
    result = _scan(tmp_path, (
        "import importlib\nfrom monai.utils import optional_import\n\n"
        "cupy, has_cupy = optional_import(\"cupy\")\nnvml = importlib.import_module(\"pynvml\")\n"
        "np_, _ = optional_import(\"numpy\")\n\n\ndef labels(x):\n    nvml.nvmlInit()\n"
        "    return cupy.asnumpy(cupy.asarray(x)), np_.zeros(1)\n"))
    assert [(line, code) for line, code, _ in _sites(result)] == [
        (4, "KERN007"), (5, "KERN008"), (10, "KERN008"), (11, "KERN007"), (11, "KERN007")]
    assert [(a.code, a.unit) for a in actions(result.findings)] == [("KERN007", "import"), ("KERN008", "import")]


def test_a_module_kept_on_self_reports_its_uses(tmp_path):
    """ultralytics keeps NVML as `self.pynvml` after a function-local import; a rewritten library is not followed."""
    result = _scan(tmp_path, (
        "class GPUInfo:\n    def __init__(self):\n        import pynvml\n        import torch\n\n"
        "        self.pynvml = pynvml\n        self.torch = torch\n\n    def count(self):\n"
        "        self.torch.cuda.synchronize()\n        return self.pynvml.nvmlDeviceGetCount()\n"))
    assert [(line, code, symbol) for line, code, symbol in _sites(result) if line > 4] == [
        (6, "KERN008", "pynvml"), (6, "KERN008", "pynvml"), (11, "KERN008", "pynvml.nvmlDeviceGetCount")]


def test_torch_reached_through_another_module_is_reported_and_left_to_a_person(tmp_path):
    """ultralytics' tests patch `torch_utils.torch.cuda`: torch as another module's attribute."""
    result = _scan(tmp_path, (
        "from ultralytics.utils import torch_utils\n\n\ndef test_select(monkeypatch):\n"
        "    monkeypatch.setattr(torch_utils.torch.cuda, \"is_available\", lambda: True)\n"
        "    return torch_utils.torch.cuda.device_count()\n"))
    assert [(line, symbol) for line, _, symbol in _sites(result)] == [(5, "torch.cuda"), (6, "torch.cuda.device_count")]
    assert all(f.fix is None for f in result.findings)
