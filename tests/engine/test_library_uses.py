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
