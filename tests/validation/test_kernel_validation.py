"""`migrate validate --kernel` (issue 41 item 4) on kernels in the shape of real public ones
(tests/fixtures/triton_kernels/, each naming the kernel it follows and its licence): the port `migrate fix`
makes passes under Triton's interpreter, and a seeded slip (mask, block offset, accumulation dtype) fails,
naming the kernel, the first differing element and the block of the original that wrote it."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

from migrator import api
from migrator.ground.usage_error import UsageError
from migrator.reporters.kernel_validation import render_text
from migrator.validation.verdict import Verdict

pytestmark = pytest.mark.skipif(importlib.util.find_spec("triton") is None,
                                reason="upstream triton absent (the `kernels` extra)")
FIXTURES = Path(__file__).parents[1] / "fixtures" / "triton_kernels"

# kernel, its arguments, grid; a slip seeded into the port: (text, replacement, what kind); and how an
# element's coordinates name the program that owns it (rows: the first coordinate; vectors: index // BLOCK)
KERNELS = {
    "softmax": ("softmax_kernel", "output_ptr:float32[6,100],input_ptr:float32[6,100],input_row_stride=100,"
                "output_row_stride=100,n_cols=100,BLOCK_SIZE=128", "6",
                ("mask = col_offsets < n_cols", "mask = col_offsets < n_cols - 3", "mask")),
    "layer_norm": ("layer_norm_fwd", "X:float32[5,300],Y:float32[5,300],W:float32[300],B:float32[300],Mean:float32[5],"
                   "Rstd:float32[5],stride=300,N=300,eps=1e-5,BLOCK_SIZE=128", "5",
                   ("acc = tl.zeros([BLOCK_SIZE], dtype=tl.float32)\n    for off in range(0, N, BLOCK_SIZE):\n"
                    "        cols = off + tl.arange(0, BLOCK_SIZE)\n"
                    "        acc += tl.load(X + cols, mask=cols < N, other=0.0).to(tl.float32)",
                    "acc = tl.zeros([BLOCK_SIZE], dtype=tl.float16)\n    for off in range(0, N, BLOCK_SIZE):\n"
                    "        cols = off + tl.arange(0, BLOCK_SIZE)\n"
                    "        acc += tl.load(X + cols, mask=cols < N, other=0.0).to(tl.float16)", "accumulation dtype")),
    "rms_norm": ("rms_norm_fwd", "Y_ptr:float32[4,200],Y_row_stride=200,X_ptr:float32[4,200],X_row_stride=200,"
                 "W_ptr:float32[200],RSTD_ptr:float32[4],n_cols=200,eps=1e-6,BLOCK_SIZE=256", "4",
                 ("X_ptr + row_idx * X_row_stride", "X_ptr + (row_idx ^ 1) * X_row_stride", "block offset")),
    "cross_entropy": ("cross_entropy_fwd", "X_ptr:float32[4,3000],X_stride=3000,Y_ptr:int64[4]~0:3000,"
                      "loss_ptr:float32[4],n_cols=3000,ignore_index=-100,BLOCK_SIZE=1024", "4",
                      ("d = d * tl.exp(m - m_new) + tl.sum(tl.exp(X_block - m_new))",
                       "d = (d * tl.exp(m - m_new) + tl.sum(tl.exp(X_block - m_new))).to(tl.bfloat16).to(tl.float32)",
                       "accumulation dtype")),
    "rope": ("rope_fwd", "q_ptr:float32[2,8,4,64],q_row_stride=256,k_ptr:float32[2,8,2,64],k_row_stride=128,"
             "cos:float32[8,32],cos_row_stride=32,sin:float32[8,32],sin_row_stride=32,sl=8,n_qh=4,n_kh=2,hd=64,"
             "pad_n_qh=4,pad_n_kh=2,pad_hd=64", "16",
             ("cos_row_idx = pid % sl", "cos_row_idx = (pid + 1) % sl", "block offset")),
}


def _row_block(name: str, coords: tuple[int, ...]) -> int:
    """The program of a row kernel that owns an element: its row (rope: a token is (batch, seq))."""
    return coords[0] * 8 + coords[1] if name == "rope" else coords[0]


@pytest.mark.parametrize("name", sorted(KERNELS))
def test_the_fix_output_passes_under_the_interpreter(name):
    kernel, args, grid, _ = KERNELS[name]
    result = api.validate_kernel(f"{FIXTURES / name}.py::{kernel}", args, grid)
    assert result.error is None, result.error
    assert result.verdict == Verdict.PASS and result.exit_code == 0
    assert result.outputs and all(o.verdict == Verdict.PASS for o in result.outputs)


@pytest.mark.parametrize("name", sorted(KERNELS))
def test_a_seeded_slip_fails_naming_the_kernel_and_the_first_differing_block(tmp_path, name):
    kernel, args, grid, (text, slip, _kind) = KERNELS[name]
    source = (FIXTURES / f"{name}.py").read_text()
    assert text in source
    ported = tmp_path / f"{name}.py"
    ported.write_text(source.replace(text, slip, 1))
    result = api.validate_kernel(f"{FIXTURES / name}.py::{kernel}", args, grid, ported=str(ported))
    assert result.verdict == Verdict.FAIL and result.exit_code == 1
    failing = [o for o in result.outputs if o.verdict == Verdict.FAIL]
    first = failing[0].first
    assert first is not None and first.block == _row_block(name, first.coords)
    shown = render_text(result)
    assert f"kernel `{kernel}`: FAIL" in shown
    assert f"`{failing[0].name}`{list(first.coords)}" in shown and f"block (program id) {first.block}" in shown


def _persistent_pair(tmp_path: Path) -> tuple[Path, Path]:
    """A vector kernel whose grid passes 65535, and its persistent port made by `migrate fix`."""
    code = ("import triton\nimport triton.language as tl\n\n@triton.jit\n"
            "def scale_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):\n    pid = tl.program_id(0)\n"
            "    offs = pid * BLOCK + tl.arange(0, BLOCK)\n    mask = offs < n\n"
            "    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) * 2.0 + 1.0, mask=mask)\n\n"
            "def scale(x, out):\n    scale_kernel[(1048576,)](x, out, 67108864, BLOCK=64)\n")
    original = tmp_path / "orig" / "scale.py"
    original.parent.mkdir()
    original.write_text(code)
    tree = tmp_path / "port"
    tree.mkdir()
    (tree / "pyproject.toml").write_text("")
    (tree / "scale.py").write_text(code)
    api.fix([tree / "scale.py"], root=tree, target="npu", use_cache=False)
    assert "for pid in range(tl.program_id(0), N_PROGRAMS, tl.num_programs(0)):" in (tree / "scale.py").read_text()
    return original, tree / "scale.py"


def test_the_persistent_port_computes_what_the_original_did(tmp_path):
    original, ported = _persistent_pair(tmp_path)
    args = "x_ptr:float32[1000],out_ptr:float32[1000],n=1000,BLOCK=64"
    result = api.validate_kernel(f"{original}::scale_kernel", args, "16", ported=str(ported), cores=3)
    assert result.error is None and result.verdict == Verdict.PASS
    slipped = tmp_path / "slip.py"
    slipped.write_text(ported.read_text().replace("mask = offs < n", "mask = offs < n - 64"))
    failed = api.validate_kernel(f"{original}::scale_kernel", args, "16", ported=str(slipped), cores=3)
    out = next(o for o in failed.outputs if o.name == "out_ptr")
    assert out.verdict == Verdict.FAIL and out.first is not None
    assert out.first.block == out.first.index // 64  # the original's program of that element


# What real kernel files do around their kernels (Liger-Kernel 0.8.5, fla-core 0.6.0): names imported from
# the project's own package (absent here), rsqrt chosen by a module-level `if` on one of them, autotune kwargs
# from that package, a float argument used as a Triton scalar and a string constexpr.
REAL_FILE_HABITS = """
import operator

import triton
import triton.language as tl
from some_project.utils import autotune_cache_kwargs, compare_version

if compare_version("triton", operator.ge, "3.0.0"):
    from triton.language.extra.libdevice import rsqrt
else:
    from triton.language.math import rsqrt


@triton.autotune(configs=[triton.Config({"BLOCK": 32}, num_warps=4)], key=["n"], **autotune_cache_kwargs)
@triton.jit
def rms_kernel(x_ptr, out_ptr, n, eps, MODE: tl.constexpr, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + row * n + offs, mask=mask, other=0.0)
    y = x * rsqrt(tl.sum(x * x, axis=0) / n + eps.to(tl.float32))
    if MODE == "double":
        y = y * 2.0
    tl.store(out_ptr + row * n + offs, y, mask=mask)
"""


def test_a_kernel_in_a_real_file_s_surroundings_runs_and_its_port_passes(tmp_path):
    kernel = tmp_path / "norms.py"
    kernel.write_text(REAL_FILE_HABITS)
    args = "x_ptr:float32[3,20],out_ptr:float32[3,20],n=20,eps=1e-6,MODE='double'"
    result = api.validate_kernel(f"{kernel}::rms_kernel", args, "3")
    assert result.error is None, result.error
    assert result.verdict == Verdict.PASS
    slipped = tmp_path / "slipped.py"
    slipped.write_text(REAL_FILE_HABITS.replace('MODE == "double"', 'MODE == "single"'))
    failed = api.validate_kernel(f"{kernel}::rms_kernel", args, "3", ported=str(slipped))
    out = next(o for o in failed.outputs if o.name == "out_ptr")  # the string constexpr reached the kernel
    assert out.verdict == Verdict.FAIL and out.first is not None and out.first.block == out.first.coords[0]


def test_bad_input_is_a_usage_error_naming_it(tmp_path):
    with pytest.raises(UsageError, match="nope.py: no such file"):
        api.validate_kernel(f"{tmp_path}/nope.py::k", "n=1", "1")
    with pytest.raises(UsageError, match="FILE::KERNEL"):
        api.validate_kernel("k.py", "n=1", "1")


def test_a_kernel_the_file_does_not_have_is_an_error_result(tmp_path):
    result = api.validate_kernel(f"{FIXTURES / 'softmax.py'}::no_such_kernel", "n=1", "1",
                                 ported=str(FIXTURES / "softmax.py"))
    assert result.exit_code == 2 and "no `no_such_kernel`" in (result.error or "")


def test_the_cli_prints_the_verdict_and_exits_with_it(tmp_path):
    kernel, args, grid, _ = KERNELS["softmax"]
    done = subprocess.run([sys.executable, "-m", "migrator", "validate", "--kernel", f"{FIXTURES}/softmax.py::{kernel}",
                           "--kernel-args", args, "--grid", grid], capture_output=True, text=True,
                          cwd=Path(__file__).parents[2])
    assert done.returncode == 0 and f"kernel `{kernel}`: PASS" in done.stdout
