"""Triton kernels on Ascend: one finding per construct Triton-Ascend does not run (KERN016-KERN020);
a kernel written the Triton-Ascend way gets no error."""

from __future__ import annotations

from tests.engine.helpers import scan_text

# The migration guide's vector add, as it runs on Ascend (multiple_of / max_contiguous are hints
# Ascend's own tutorials keep), and its masked_fill with a sub-block loop.
ASCEND_TUTORIAL = '''
import torch
import torch_npu
import triton
import triton.language as tl


@triton.jit
def add_kernel(x_ptr, y_ptr, output_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    pid = tl.program_id(axis=0)
    offsets = tl.max_contiguous(tl.multiple_of(pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE), BLOCK_SIZE), BLOCK_SIZE)
    mask = offsets < n_elements
    x = tl.load(x_ptr + offsets, mask=mask)
    y = tl.load(y_ptr + offsets, mask=mask)
    tl.store(output_ptr + offsets, x + y, mask=mask)


@triton.jit
def masked_fill_kernel(inp, expand_mask, value, out, N, BLOCK_SIZE: tl.constexpr, BLOCK_SIZE_SUB: tl.constexpr):
    base_offset = tl.program_id(axis=0) * BLOCK_SIZE
    for sub_block_idx in range(tl.cdiv(BLOCK_SIZE, BLOCK_SIZE_SUB)):
        offsets = base_offset + sub_block_idx * BLOCK_SIZE_SUB + tl.arange(0, BLOCK_SIZE_SUB)
        mask = offsets < N
        input_vals = tl.load(inp + offsets, mask=mask, other=0)
        fill_mask_vals = tl.load(expand_mask + offsets, mask=mask, other=0).to(tl.int1)
        value_to_write = tl.full([BLOCK_SIZE_SUB], value, dtype=input_vals.dtype)
        tl.store(out + offsets, tl.where(fill_mask_vals, value_to_write, input_vals), mask=mask)


def add(x, y):
    output = torch.empty_like(x)
    n_elements = output.numel()
    grid = lambda meta: (triton.cdiv(n_elements, meta['BLOCK_SIZE']), )
    add_kernel[grid](x, y, output, n_elements, BLOCK_SIZE=1024)
    return output


def masked_fill(inp, expand_mask, value):
    out = torch.zeros_like(inp)
    N = 1073741824
    grid = lambda meta: (triton.cdiv(N, 32768),)
    masked_fill_kernel[grid](inp, expand_mask.to(torch.int), value, out, N, 32768, 1024)
    return out


x = torch.rand(98432, device='npu')
'''

UPSTREAM = '''
import triton
import triton.language as tl
from triton.language.extra import libdevice
from triton.tools.tensor_descriptor import TensorDescriptor

DEVICE = triton.runtime.driver.active.get_active_torch_device()


@triton.jit
def _helper(x):
    return libdevice.tanh(x)


@triton.autotune(configs=[triton.Config({"BLOCK_M": 128}, num_warps=8, num_stages=3)], key=["M"])
@triton.jit
def matmul_kernel(a_desc, b_desc, c_ptr, a_scale, K, BLOCK_M: tl.constexpr, BLOCK_K: tl.constexpr):
    pid = tl.program_id(0)
    acc = tl.zeros((BLOCK_M, BLOCK_M), dtype=tl.float32)
    for k in tl.range(0, K, BLOCK_K, warp_specialize=True):
        a = tl._experimental_descriptor_load(a_desc, [pid * BLOCK_M, k], [BLOCK_M, BLOCK_K], tl.float8e4nv)
        b = tl._experimental_descriptor_load(b_desc, [k, 0], [BLOCK_K, BLOCK_M], tl.float8e4nv)
        acc = tl.dot_scaled(a, a_scale, "e4m3", b, None, "e4m3", acc)
    tl.store(c_ptr + tl.arange(0, BLOCK_M), _helper(acc))


def run(a, c):
    desc = TensorDescriptor.from_tensor(a, [128, 64])
    matmul_kernel[(1,)](desc, desc, c, None, 64, BLOCK_K=64)
'''


def _findings(tmp_path, code):
    return scan_text(tmp_path, code).findings


def test_ascend_tutorial_kernels_have_no_error(tmp_path):
    found = _findings(tmp_path, ASCEND_TUTORIAL)
    assert [(f.code, f.line) for f in found if f.severity == "error"] == []
    assert {f.code for f in found if f.family == "kernels"} == {"KERN004"}  # the install-triton-ascend warning


def test_upstream_kernel_one_finding_per_construct(tmp_path):
    found = [f for f in _findings(tmp_path, UPSTREAM) if f.code in ("KERN016", "KERN018")]
    assert sorted((f.code, f.symbol) for f in found) == sorted([
        ("KERN016", "triton.runtime.driver.active.get_active_torch_device"),
        ("KERN016", "tl.extra.libdevice.tanh"),  # in a @triton.jit helper
        ("KERN016", "warp_specialize"),
        ("KERN016", "tl._experimental_descriptor_load"),  # twice in the kernel, one finding
        ("KERN016", "tl.float8e4nv"),
        ("KERN016", "tl.dot_scaled"),
        ("KERN016", "triton.tools.tensor_descriptor.TensorDescriptor.from_tensor"),  # host-side TMA
        ("KERN018", "num_warps=8"),
        ("KERN018", "num_stages=3"),
    ])
    assert all(f.severity == "error" for f in found if f.code == "KERN016")


def test_aliases_and_dtypes(tmp_path):
    code = '''
from triton import jit
import triton.language as lang


@jit
def k(p, B: lang.constexpr):
    idx = lang.arange(0, B).to(lang.int64)
    t = lang.trans(lang.reshape(idx, (B // 2, 2)))
    w = lang.zeros((B, B), dtype=lang.int32)
    lang.store(p, lang.dot(w, w) + lang.exp(w) + (idx // 2))
    lang.store(p, lang.sqrt(lang.zeros((B,), dtype=lang.float32)))
'''
    found = sorted((f.line, f.symbol) for f in _findings(tmp_path, code) if f.code == "KERN017")
    assert found == [(9, "trans on int64"), (11, "dot on int32"), (11, "exp on int32")]


def test_grid_over_the_core_dimension_limit_names_its_numbers(tmp_path):
    code = '''
import triton
import triton.language as tl


@triton.jit
def zeros_kernel(out_ptr, n, BLOCK_SIZE: tl.constexpr):
    offs = tl.program_id(0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    tl.store(out_ptr + offs, 0.0, mask=offs < n)


N = 2**30


def zeros(out):
    grid = lambda meta: (triton.cdiv(N, meta["BLOCK_SIZE"]),)
    zeros_kernel[grid](out, N, BLOCK_SIZE=1024)
    zeros_kernel[(triton.cdiv(N, 32768),)](out, N, BLOCK_SIZE=32768)
    zeros_kernel[(out.numel(),)](out, N, BLOCK_SIZE=1024)
'''
    found = [f for f in _findings(tmp_path, code) if f.code == "KERN019"]
    assert [(f.line, f.symbol) for f in found] == [(17, "zeros_kernel")]
    assert "1048576 programs > 65535" in found[0].message
    assert "triton.cdiv(N, meta['BLOCK_SIZE'])" in found[0].message


def test_unified_buffer_overflow_from_block_sizes(tmp_path):
    code = '''
import triton
import triton.language as tl


@triton.jit
def masked_fill_kernel(inp, expand_mask, value, out, N, BLOCK_SIZE: tl.constexpr):
    offsets = tl.program_id(axis=0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < N
    fill_mask = tl.load(expand_mask + offsets, mask=mask, other=0).to(tl.int1)
    cur_inp = tl.load(inp + offsets, mask=(~fill_mask) & mask, other=0)
    tl.store(out + offsets, cur_inp, (~fill_mask) & mask)


def masked_fill(inp, mask, value, out):
    masked_fill_kernel[(1,)](inp, mask, value, out, inp.numel(), 32768)
    masked_fill_kernel[(1,)](inp, mask, value, out, inp.numel(), 4096)
'''
    found = [f for f in _findings(tmp_path, code) if f.code == "KERN020"]
    assert [f.line for f in found] == [16]
    assert "BLOCK_SIZE=32768" in found[0].message and "384 KB > 192 KB" in found[0].message


# Liger-Kernel's way of choosing rsqrt (liger_kernel/ops/rms_norm.py, 0.8.5): one name, three imports
CONDITIONAL_LIBDEVICE = '''
import operator

import torch
import triton
import triton.language as tl
from liger_kernel.ops.utils import compare_version

if compare_version("triton", operator.ge, "3.0.0"):
    try:
        from triton.language.extra.libdevice import rsqrt
    except ModuleNotFoundError:
        from triton.language.extra.cuda.libdevice import rsqrt
else:
    from triton.language.math import rsqrt


@triton.autotune(configs=[triton.Config({"B": 64})], key=["n"])
@triton.jit
def k(x, n, B: tl.constexpr):
    tl.store(x, rsqrt(tl.load(x)))


def host(y):
    return torch.rsqrt(y)
'''


def test_a_name_several_imports_bind_and_a_called_decorator_are_one_finding_each(tmp_path):
    found = _findings(tmp_path, CONDITIONAL_LIBDEVICE)
    assert [f.line for f in found if f.code == "KERN016"] == [21]  # the one use, not once per import
    assert [f.symbol for f in found if f.code == "KERN004" and f.line == 18] == ["triton.autotune"]
