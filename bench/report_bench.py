#!/usr/bin/env python3
"""Report size and time for trees holding one very long line (minified or generated code).

    python3 bench/report_bench.py              # 1, 4 and 16 MB one-line files, HTML and Markdown
    python3 bench/report_bench.py --sizes 1,2,4,8 -n 3

Each tree holds one Python file: `import torch`, then ONE line of the given size with a single
finding (`.cuda()`) in front of a long string literal. Times `migrate report` in a subprocess (scan
included, `--no-cache`), median of `-n` runs, and prints the report size and its ratios to the
smallest input: with excerpts capped the size stays flat and the time grows at most linearly.
Figures only, never asserted. Note: files over `migrator.engine.scanned_lines.MAX_BYTES` are not read back, so
their report shows "Source not available" instead of an excerpt.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def make_tree(root: Path, megabytes: int) -> None:
    root.mkdir(parents=True)
    (root / "pyproject.toml").write_text('[project]\nname = "long-line"\n')
    head = 'x = torch.zeros(2).cuda(); blob = "'
    body = "a" * (megabytes * 1_000_000 - len(head) - 1)
    (root / "minified.py").write_text("import torch\n" + head + body + '"\n')


def run_report(root: Path, out: Path) -> float:
    env = {**os.environ, "PYTHONPATH": str(REPO), "MIGRATE_CACHE_DIR": str(root.parent / "cache")}
    started = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "migrator", "report", str(root), "-o", str(out), "--no-cache"],
                          env=env, capture_output=True, text=True)
    elapsed = time.perf_counter() - started
    if proc.returncode != 0:
        raise SystemExit(f"migrate report failed ({proc.returncode}): {proc.stderr.strip()}")
    return elapsed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1,4,16", help="line sizes in MB (comma-separated)")
    parser.add_argument("-n", "--reps", type=int, default=3)
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",") if s.strip()]
    rows = []
    with tempfile.TemporaryDirectory(prefix="report-bench-") as tmp:
        for mb in sizes:
            root = Path(tmp) / f"tree{mb}"
            make_tree(root, mb)
            for fmt in ("html", "md"):
                out = Path(tmp) / f"report{mb}.{fmt}"
                seconds = statistics.median(run_report(root, out) for _ in range(args.reps))
                rows.append((mb, fmt, out.stat().st_size, seconds))
    print(f"{'input':>8} {'format':>6} {'report bytes':>13} {'size ratio':>10} {'median s':>9} {'time ratio':>10}")
    for mb, fmt, size, seconds in rows:
        base = next(r for r in rows if r[1] == fmt)
        print(f"{mb:>6}MB {fmt:>6} {size:>13,} {size / base[2]:>10.2f} {seconds:>9.2f} {seconds / base[3]:>10.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
