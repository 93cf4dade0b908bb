"""`migrate validate --kernel` on real Triton kernels from pinned PyPI sdists (issue 41, acceptance 3).

    python bench/kernel_validation.py [--cache DIR] [NAME ...]

For each kernel: the file is copied out of the unpacked sdist (the cache is never edited) and ported with
`migrate fix --target npu`; the port is validated against the original under Triton's interpreter
(`TRITON_INTERPRET=1`, tiny shapes); then one slip is seeded into the port by a source edit (a mask, a
block offset, the accumulator rounded to bf16) and must fail, naming the kernel and the first differing
element with the block (program id) of the original that wrote it. Printed per kernel: what the port
changed, both verdicts, the first difference, and the interpreter's wall time of each launch.

Only the arguments and the slips live here (the kernels stay in the cache). Needs the `kernels` extra
(upstream triton 3.2.0) and the network on first use (`bench/sdists.py`).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from sdists import BenchError, Pin, fetch_tree  # noqa: E402

# Digests as PyPI publishes them (https://pypi.org/simple/<name>/, PEP 691 JSON), pinned 2026-12-07.
PINS: dict[str, Pin] = {
    "liger-kernel": Pin("liger-kernel", "0.8.5", "liger_kernel-0.8.5.tar.gz",
                        "4e8f8f611a8ad735c37c989410d09820bb08881f131851a3967c34baa7889d66"),
    "fla-core": Pin("fla-core", "0.6.0", "fla_core-0.6.0.tar.gz",
                    "cdd5b7ff6d5c0e5c08fde73f2624d76e0b506f8684af4e316bc7f2d8bfd9a623"),
}
LIGER = "src/liger_kernel/ops/"


@dataclass(frozen=True)
class Slip:
    kind: str  # "mask" | "block offset" | "accumulation dtype"
    text: str  # as the port has it
    slipped: str


@dataclass(frozen=True)
class RealKernel:
    pin: str
    path: str  # inside the unpacked sdist
    kernel: str
    args: str  # --kernel-args
    grid: str
    slips: tuple[Slip, ...]
    owner: Callable[[tuple[int, ...]], int]  # the program of the original that writes an element


def _row(coords: tuple[int, ...]) -> int:
    return coords[0]


def _swizzle2d(i: int, j: int, size_i: int, size_j: int, size_g: int) -> tuple[int, int]:
    """`tl.swizzle2d` (triton/language/standard.py) on host integers."""
    ij = i * size_j + j
    group = ij // (size_g * size_j)
    first = group * size_g
    size_g = min(size_i - first, size_g)
    return first + ij % size_g, (ij % (size_g * size_j)) // size_g


def _matmul_tile(coords: tuple[int, ...]) -> int:
    """The program of fla's matmul (grid (1, 3, 4), 16x16 tiles, G=4) whose swizzled tile holds c[b, m, n]."""
    _, m, n = coords
    return next(y + 3 * z for y in range(3) for z in range(4) if _swizzle2d(y, z, 3, 4, 4) == (m // 16, n // 16))


KERNELS: dict[str, RealKernel] = {
    "softmax": RealKernel(
        "liger-kernel", LIGER + "softmax.py", "_softmax_single_block_forward_kernel",
        "Y_ptr:float32[6,100],Y_row_stride=100,X_ptr:float32[6,100],X_row_stride=100,n_cols=100,BLOCK_SIZE=128", "6",
        (Slip("mask", "mask = offs < n_cols", "mask = offs < n_cols - 1"),), _row),
    "rms_norm": RealKernel(
        "liger-kernel", LIGER + "rms_norm.py", "_rms_norm_forward_kernel",
        "Y_ptr:float32[4,200],Y_row_stride=200,X_ptr:float32[4,200],X_row_stride=200,W_ptr:float32[200],W_row_stride=1,"
        "RSTD_ptr:float32[4],RSTD_row_stride=1,n_cols=200,eps=1e-6,offset=0.0,casting_mode=0,elementwise_affine=True,"
        "BLOCK_SIZE=256", "4",
        (Slip("block offset", "x_base = X_ptr + row_idx * X_row_stride",
              "x_base = X_ptr + (row_idx ^ 1) * X_row_stride"),), _row),
    "layer_norm": RealKernel(
        "liger-kernel", LIGER + "layer_norm.py", "_layer_norm_forward_kernel",
        "Y_ptr:float32[5,300],Y_row_stride=300,X_ptr:float32[5,300],X_row_stride=300,W_ptr:float32[300],W_row_stride=1,"
        "B_ptr:float32[300],B_row_stride=1,Mean_ptr:float32[5],Mean_row_stride=1,RSTD_ptr:float32[5],RSTD_row_stride=1,"
        "n_cols=300,eps=1e-5,BLOCK_SIZE=512", "5",
        (Slip("mask", "X_centered_masked = tl.where(mask, X_centered, 0.0)", "X_centered_masked = X_centered"),), _row),
    "cross_entropy": RealKernel(
        "liger-kernel", LIGER + "cross_entropy.py", "liger_cross_entropy_kernel",
        "X_ptr:float32[4,300],X_stride=300,Y_ptr:int64[4]~0:300,Y_stride=1,weight_ptr=None,loss_ptr:float32[4],"
        "z_loss_ptr=None,loss_stride=1,token_accuracy_ptr=None,token_accuracy_stride=0,predicted_tokens_ptr=None,"
        "predicted_tokens_stride=0,n_cols=300,n_non_ignore=4,sum_non_ignore_weight=4,weight_sum=0.0,ignore_index=-100,"
        "lse_square_scale=0.0,label_smoothing=0.0,reduction='mean',softcap=None,RETURN_Z_LOSS=False,"
        "RETURN_TOKEN_ACCURACY=False,RETURN_PREDICTED_TOKENS=False,BLOCK_SIZE=128,HAS_WEIGHT=False,"
        "HAS_SOFTCAPPING=False,HAS_GRADIENTS=True", "4",
        (Slip("accumulation dtype", "d = d * tl.exp2((m - m_new) * LOG2_E) + tl.sum(tl.exp2((X_block - m_new) * LOG2_E))",
              "d = (d * tl.exp2((m - m_new) * LOG2_E) + tl.sum(tl.exp2((X_block - m_new) * LOG2_E)))"
              ".to(tl.bfloat16).to(tl.float32)"),), _row),
    "rope": RealKernel(
        "liger-kernel", LIGER + "rope.py", "_triton_rope",
        "q_ptr:float32[2,8,4,64],q_row_stride=256,k_ptr:float32[2,8,2,64],k_row_stride=128,cos:float32[2,8,64],"
        "cos_row_stride=64,sin:float32[2,8,64],sin_row_stride=64,sl=8,bs=2,cos_bs=2,n_qh=4,n_kh=2,hd=64,pad_n_qh=4,"
        "pad_n_kh=2,pad_hd=64,pad_rd=64,rd=64,BLOCK_SIZE=64", "16",
        (Slip("block offset", "cos_row_idx = pid % sl", "cos_row_idx = (pid + 1) % sl"),
         Slip("block offset", "batch_idx = pid // sl", "batch_idx = pid // (sl + 1)")),  # the second: batch 1 only
        lambda coords: coords[0] * 8 + coords[1]),  # a program per token: (batch, position)
    "matmul": RealKernel(
        "fla-core", "fla/ops/utils/matmul.py", "matmul_kernel",
        "a:float32[1,40,48],b:float32[48,56],c:float32[1,40,56],input=None,alpha=None,beta=None,M=40,N=56,K=48,"
        "stride_ab=1920,stride_am=48,stride_ak=1,stride_bk=56,stride_bn=1,stride_cb=2240,stride_cm=56,stride_cn=1,"
        "BM=16,BK=16,BN=16,G=4,ACTIVATION='',HAS_INPUT=False,ALLOW_TF32=False", "1,3,4",
        (Slip("accumulation dtype", "b_acc = tl.dot(b_a, b_b, acc=b_acc, input_precision=\"tf32\" if ALLOW_TF32 else \"ieee\")",
              "b_acc = tl.dot(b_a, b_b, acc=b_acc, input_precision=\"tf32\" if ALLOW_TF32 else \"ieee\")"
              ".to(tl.bfloat16).to(tl.float32)"),
         Slip("mask", "mask = (o_cm[:, None] < M) & (o_cn[None, :] < N)", "mask = (o_cm[:, None] < M) & (o_cn[None, :] < N - 1)")),
        _matmul_tile),  # the second slip: the last column only, in the tiles of the last column block
}


@dataclass(frozen=True)
class Outcome:
    name: str
    edits: tuple[str, ...]  # rule codes `migrate fix` applied to the file
    port: object  # KernelValidation of the port
    slipped: tuple  # KernelValidation of the port with each slip
    validate_s: float  # wall time of the port's validation (child process, torch + triton imports included)


def port(original: Path, work: Path) -> tuple[Path, tuple[str, ...]]:
    """`original` copied into a tree of its own under `work` and fixed there for the npu target."""
    from migrator import api

    root = work / "port"
    root.mkdir(parents=True)
    (root / "pyproject.toml").write_text("", encoding="utf-8")
    copy = root / original.name
    copy.write_bytes(original.read_bytes())
    outcome = api.fix([copy], root=root, target="npu", use_cache=False)
    if outcome.errors:
        raise BenchError(f"{original}: the port failed: {outcome.errors}")
    return copy, tuple(sorted(e.code for c in outcome.plan.changes for e in c.edits))


def run_one(name: str, tree: Path, work: Path) -> Outcome:
    from migrator import api

    spec = KERNELS[name]
    original = tree / spec.path
    ported, edits = port(original, work)
    started = time.perf_counter()
    passed = api.validate_kernel(f"{original}::{spec.kernel}", spec.args, spec.grid, ported=str(ported))
    validate_s = time.perf_counter() - started
    text = ported.read_text(encoding="utf-8")
    failed = []
    for number, slip in enumerate(spec.slips):
        if slip.text not in text:
            raise BenchError(f"{name}: the slip's text is not in the port of {spec.path}: {slip.text!r}")
        slipped = work / f"slip{number}" / original.name
        slipped.parent.mkdir()
        slipped.write_text(text.replace(slip.text, slip.slipped, 1), encoding="utf-8")
        failed.append(api.validate_kernel(f"{original}::{spec.kernel}", spec.args, spec.grid, ported=str(slipped)))
    return Outcome(name, edits, passed, tuple(failed), validate_s)


def _first(result) -> str:
    out = next((o for o in result.outputs if o.first is not None), None)
    if out is None:
        return "none"
    return f"`{out.name}`{list(out.first.coords)} block {out.first.block}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="*", default=list(KERNELS), help=f"kernels (default: {', '.join(KERNELS)})")
    parser.add_argument("--cache", type=Path, default=None, help="sdist cache (default: bench/sdists.py's)")
    args = parser.parse_args(argv)
    unknown = [n for n in args.names if n not in KERNELS]
    if unknown:
        parser.error(f"unknown kernel {', '.join(unknown)}; known: {', '.join(KERNELS)}")
    from migrator.validation.verdict import Verdict

    bad = 0
    print("| kernel | sdist | port's edits | port | slip | slipped | first difference | interpreter s (orig / port / slipped) |")
    print("|---|---|---|---|---|---|---|---|")
    for name in args.names:
        spec = KERNELS[name]
        try:
            tree = fetch_tree(PINS[spec.pin], args.cache, log=lambda m: print(m, file=sys.stderr))
            with tempfile.TemporaryDirectory(prefix="kernel-validation-") as work:
                o = run_one(name, tree, Path(work))
        except BenchError as exc:
            print(f"kernel_validation: {exc}", file=sys.stderr)
            return 2
        edits = ", ".join(f"{c}×{o.edits.count(c)}" for c in sorted(set(o.edits))) or "none"
        for slip, failed in zip(spec.slips, o.slipped):
            bad += o.port.verdict != Verdict.PASS or failed.verdict != Verdict.FAIL
            seconds = f"{o.port.seconds_original:.2f} / {o.port.seconds_ported:.2f} / {failed.seconds_ported:.2f}"
            print(f"| {name} `{spec.kernel}` | {PINS[spec.pin].name} {PINS[spec.pin].version} | {edits} | "
                  f"{o.port.verdict} | {slip.kind} | {failed.verdict} | {_first(failed)} | {seconds} |")
        for result in (o.port, *o.slipped):
            if result.error:
                print(f"  {name}: {result.error}", file=sys.stderr)
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
