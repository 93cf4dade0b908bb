#!/usr/bin/env python3
"""Op verdicts on real trees: how many ops are "partial", how many OPS notes and warnings `scan` gives.

    python3 bench/op_verdicts.py                   # timm, accelerate, fairseq (pinned sdists)
    python3 bench/op_verdicts.py -p timm

Prints, per package: distinct ops, ops per status, findings per OPS code, and the value dtypes the
tree shows (what a dtype limit is judged against). Run it on two checkouts (`PYTHONPATH=<other>`)
to compare rules; the sdists are pinned in `real_repos.py` and cached outside the repository.
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from real_repos import PACKAGES  # noqa: E402
from sdists import fetch_tree  # noqa: E402

DEFAULT = ("timm", "accelerate", "fairseq")


def measure(name: str) -> dict:
    from migrator import api

    tree = fetch_tree(PACKAGES[name].pin)
    result = api.scan([tree], root=tree, use_cache=False)
    coverage = result.summary.coverage
    codes = Counter(f.code for f in result.findings if f.code.startswith("OPS"))
    return {"package": name, "ops": coverage.distinct_ops if coverage else 0,
            "by_status": coverage.by_status if coverage else {},
            "codes": dict(sorted(codes.items()))}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("-p", "--package", action="append", choices=sorted(PACKAGES))
    args = parser.parse_args()
    print(f"{'package':<12} {'ops':>5} {'partial':>8} {'unsupp.':>8}  OPS findings")
    for name in args.package or DEFAULT:
        row = measure(name)
        status = row["by_status"]
        codes = " ".join(f"{code}={count}" for code, count in row["codes"].items()) or "-"
        print(f"{name:<12} {row['ops']:>5} {status.get('partial', 0):>8} {status.get('unsupported', 0):>8}  {codes}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
