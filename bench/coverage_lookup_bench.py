#!/usr/bin/env python3
"""Op-coverage lookup timings (figures only, never asserted).

    python3 bench/coverage_lookup_bench.py          # 5 runs, medians
    python3 bench/coverage_lookup_bench.py -n 9

Prints, as medians over fresh interpreters: `import migrator.catalogue.coverage` plus the first lookup (reads
and parses the committed table), and the mean time of 100 further lookups in the same process.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CHILD = """
import time
t = time.perf_counter()
import migrator.catalogue.coverage as c
c.lookup('torch.matmul')
first = time.perf_counter() - t
t = time.perf_counter()
for _ in range(100):
    c.lookup('torch.nn.functional.gelu')
print(first, (time.perf_counter() - t) / 100)
"""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", "--reps", type=int, default=5)
    args = parser.parse_args()
    firsts, repeats = [], []
    for _ in range(args.reps):
        out = subprocess.run([sys.executable, "-c", CHILD], cwd=REPO, capture_output=True, text=True, check=True)
        first, repeated = map(float, out.stdout.split())
        firsts.append(first)
        repeats.append(repeated)
    print(f"import + first lookup: median {statistics.median(firsts) * 1e3:.1f} ms over {args.reps} runs")
    print(f"repeated lookup:       median {statistics.median(repeats) * 1e6:.1f} us (mean of 100 per run)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
