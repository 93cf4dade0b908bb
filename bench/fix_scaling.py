#!/usr/bin/env python3
"""Is `migrate fix` linear in the work? Generated files of 1x/2x/4x/8x the CUDA sites, and megatron-core.

    python3 bench/fix_scaling.py                 # base 250 blocks (~78 KB), 3 runs each, medians
    python3 bench/fix_scaling.py --base 100 -n 5 --no-megatron

Each size is one generated module of N copies of a block with `.cuda()`, `.to("cuda")`,
`torch.cuda.amp.autocast()`, `torch.cuda.synchronize()`, `torch.device("cuda:0")`,
`torch.cuda.is_available()` and `torch.cuda.empty_cache()` (8 fixable sites per block), fixed with
`python -m migrator fix --no-cache` in a subprocess on a fresh copy each time (what a user waits
for). It prints the median wall time and CPU time (the child's user+sys, steadier than wall on a
busy machine) per size, and each size's ratio to the one before: linear is 2.0 per doubling, i.e.
4x the sites should take at most ~4.5x as long. Then `migrate fix` on the megatron-core 0.12.1
sdist (see bench/sdists.py), median of the runs. Figures are printed, never asserted.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from real_repos import PACKAGES  # noqa: E402
from sdists import BenchError, fetch_tree  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
MEGATRON = PACKAGES["megatron-core"].pin
BLOCK = '''
def step_{i}(model, batch, optimizer):
    model = model.cuda()
    x = batch.to("cuda")
    with torch.cuda.amp.autocast():
        y = model(x.cuda())
    torch.cuda.synchronize()
    dev = torch.device("cuda:0")
    if torch.cuda.is_available():
        torch.cuda.empty_cache()
    return y.sum().to(dev)

'''


def generated_project(folder: Path, blocks: int) -> Path:
    folder.mkdir(parents=True)
    (folder / "pyproject.toml").write_text('[project]\nname = "generated"\nversion = "0"\n')
    (folder / "train.py").write_text("import torch\n\n" + "".join(BLOCK.format(i=i) for i in range(blocks)))
    return folder


def timed_fix(project: Path) -> tuple[float, float]:
    """(wall s, child CPU s) of `python -m migrator fix --no-cache project`."""
    env = {**os.environ, "NO_COLOR": "1", "CI": "1"}
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), *filter(None, [env.get("PYTHONPATH")])])
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "migrator", "fix", "--no-cache", "-q", str(project)],
                          cwd=project, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode not in (0, 1):
        raise BenchError(f"migrate fix exited {proc.returncode}:\n{proc.stderr[-2000:]}")
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def median_fix(make, reps: int, work: Path) -> tuple[float, float]:
    walls, cpus = [], []
    for i in range(reps):
        project = make(work / f"run-{time.monotonic_ns()}-{i}")
        wall, cpu = timed_fix(project)
        walls.append(wall)
        cpus.append(cpu)
        shutil.rmtree(project, ignore_errors=True)
    return statistics.median(walls), statistics.median(cpus)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--base", type=int, default=250, help="blocks in the 1x file (default 250, ~78 KB)")
    parser.add_argument("-n", "--reps", type=int, default=3, help="runs per size (default 3; medians)")
    parser.add_argument("--sizes", default="1,2,4,8", help="multiples of --base (default 1,2,4,8)")
    parser.add_argument("--no-megatron", action="store_true", help="skip the megatron-core fix")
    parser.add_argument("--cache", type=Path, help="sdist cache (default $MIGRATE_BENCH_CACHE or ~/.cache/ascend-migrate-bench)")
    args = parser.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",")]
    try:
        load = os.getloadavg()[0]
    except OSError:
        load = float("nan")
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} CPUs, 1-min load {load:.1f}, {args.reps} runs each, medians")
    print(f"{'size':>5} {'blocks':>7} {'sites':>6} {'KB':>6} {'wall s':>8} {'cpu s':>8} {'wall ratio':>11} {'cpu ratio':>10}")
    try:
        with tempfile.TemporaryDirectory(prefix="fix-scaling-") as tmp:
            work = Path(tmp)
            previous = None
            for size in sizes:
                blocks = args.base * size
                kb = len("import torch\n\n" + "".join(BLOCK.format(i=i) for i in range(blocks))) / 1024
                wall, cpu = median_fix(lambda p, b=blocks: generated_project(p, b), args.reps, work)
                ratios = ("-", "-") if previous is None else (f"{wall / previous[0]:.2f}", f"{cpu / previous[1]:.2f}")
                print(f"{size:>4}x {blocks:>7} {blocks * 8:>6} {kb:>6.0f} {wall:>8.2f} {cpu:>8.2f} {ratios[0]:>11} {ratios[1]:>10}",
                      flush=True)
                previous = (wall, cpu)
            if not args.no_megatron:
                tree = fetch_tree(MEGATRON, args.cache)
                wall, cpu = median_fix(lambda p: Path(shutil.copytree(tree, p)), args.reps, work)
                print(f"megatron-core 0.12.1 `migrate fix`: wall {wall:.2f} s, cpu {cpu:.2f} s (median of {args.reps})")
    except BenchError as exc:
        print(f"fix_scaling: error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
