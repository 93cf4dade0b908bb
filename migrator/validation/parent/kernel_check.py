"""`migrate validate --kernel`: a Triton kernel and its port, run on the same random inputs under upstream
Triton's interpreter (`TRITON_INTERPRET=1`, numpy underneath) in a child process
(`validation/child/kernel_run.py`), every tensor argument compared after the launch.

Graded with the project's thresholds (`comparison/thresholds.py`): float32/float64 outputs by the fp32
logic bound on rel_l2 (pass <= 1e-5, warn <= 1e-4), float16/bfloat16 by the absolute bf16 forward bound
(0.02), integers and bools exactly. Both sides run on the same interpreter, so any difference is the
port's. A failing output names its first differing element and the block (program id) of the original
that wrote it.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path

from migrator.validation.kernel_spec import KernelArg
from migrator.validation.parent.comparison.thresholds import ActivationThresholds, Bounds, Fp32Logic
from migrator.validation.verdict import Verdict, worst

KERNEL_RUN = "migrator.validation.child.kernel_run"  # the child: both kernels under the interpreter
HALF = ("float16", "bfloat16")
FLOAT = ("float32", "float64")


@dataclass(frozen=True)
class FirstDifference:
    coords: tuple[int, ...]  # the element, by dimension
    index: int  # its flat index
    original: float
    ported: float
    block: int | None  # the program (linear id) of the original that wrote it; None: the original did not write it
    ported_block: int | None  # the program of the port that wrote it last (a persistent port: the core)


@dataclass(frozen=True)
class KernelOutput:
    name: str
    dtype: str
    shape: tuple[int, ...]
    rel_l2: float
    max_abs: float
    differing: int  # elements beyond the tolerance
    verdict: Verdict
    bound: str  # what the verdict was judged against
    first: FirstDifference | None


@dataclass(frozen=True)
class KernelValidation:
    kernel: str
    original: str
    ported: str
    grid: tuple[int, ...]
    cores: int
    verdict: Verdict
    outputs: tuple[KernelOutput, ...]
    seconds_original: float | None  # interpreter wall time of the launch
    seconds_ported: float | None
    error: str | None = None

    @property
    def exit_code(self) -> int:
        return {Verdict.PASS: 0, Verdict.WARN: 0, Verdict.FAIL: 1}.get(self.verdict, 2)


def bounds_for(dtype: str) -> Bounds | None:
    """The rel_l2 bounds of an output dtype; None: compared exactly."""
    if dtype in FLOAT:
        return Fp32Logic().bounds
    if dtype in HALF:
        absolute = ActivationThresholds().absolute
        return Bounds(absolute, absolute)
    return None


def check_kernel(original: str, ported: str, kernel: str, args: tuple[KernelArg, ...], grid: tuple[int, ...], *,
                 cores: int, seed: int, timeout: float) -> KernelValidation:
    with tempfile.TemporaryDirectory(prefix="migrate-kernel-") as work:
        job = {"original": str(Path(original).resolve()), "ported": str(Path(ported).resolve()), "kernel": kernel,
               "args": [asdict(a) for a in args], "grid": list(grid), "cores": cores, "seed": seed, "workdir": work,
               "tolerances": {d: (b.pass_at if (b := bounds_for(d)) else 0.0) for d in (*FLOAT, *HALF)}}
        job_path, result_path = Path(work, "job.json"), Path(work, "result.json")
        job_path.write_text(json.dumps(job), encoding="utf-8")
        from . import launcher

        # a validation child's environment (one thread, fixed hash seed): inside a warm block the child forks
        # from that environment's zygote, which imported torch (and triton with it) once
        env = launcher.worker_env(launcher.child_env(seed, 1, {"TRITON_INTERPRET": "1"}), KERNEL_RUN)
        base = KernelValidation(kernel, original, ported, grid, cores, Verdict.ERROR, (), None, None)
        try:
            done = subprocess.run([sys.executable, "-m", KERNEL_RUN, str(job_path), str(result_path)], env=env,
                                  capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            return _with_error(base, f"the kernels did not finish in {timeout:g} s under the interpreter")
        if done.returncode != 0 or not result_path.exists():
            return _with_error(base, f"the interpreter process failed: {done.stderr.strip()[-2000:]}")
        result = json.loads(result_path.read_text(encoding="utf-8"))
    if "error" in result:
        return _with_error(base, result["error"])
    outputs = tuple(_grade(o) for o in result["outputs"])
    return KernelValidation(kernel, original, ported, grid, cores, worst(o.verdict for o in outputs), outputs,
                            result["seconds"]["original"], result["seconds"]["ported"])


def _with_error(base: KernelValidation, error: str) -> KernelValidation:
    from dataclasses import replace

    return replace(base, error=error)


def _grade(raw: dict) -> KernelOutput:
    bounds = bounds_for(raw["dtype"])
    if bounds is None:
        verdict, bound = (Verdict.PASS if raw["differing"] == 0 else Verdict.FAIL), "exact"
    else:
        verdict, bound = bounds.grade(raw["rel_l2"]), f"rel_l2 <= {bounds.pass_at:g} (warn <= {bounds.warn_at:g})"
    first = raw.get("first")
    return KernelOutput(
        raw["name"], raw["dtype"], tuple(raw["shape"]), raw["rel_l2"], raw["max_abs"], raw["differing"], verdict, bound,
        FirstDifference(tuple(first["coords"]), first["index"], first["original"], first["ported"], first["block"],
                        first["ported_block"]) if first and verdict != Verdict.PASS else None)
