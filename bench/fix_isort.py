#!/usr/bin/env python3
"""isort findings `migrate fix` adds to real trees: `ruff check --select I` (the package's own ruff /
isort config, run from its root) before and after the fix.

    python3 bench/fix_isort.py                     # timm, accelerate, fairseq (pinned sdists), npu
    python3 bench/fix_isort.py -p timm --target portable

Prints per package: Python files, files with an isort finding before, files the fix changed, and the
changed files that were clean before and are not after (the number that must be 0).
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from real_repos import PACKAGES  # noqa: E402
from sdists import fetch_tree  # noqa: E402

DEFAULT = ("timm", "accelerate", "fairseq")


def isort_findings(tree: Path) -> dict[str, int]:
    ruff = shutil.which("ruff")
    if ruff is None:
        raise SystemExit("ruff is not installed (pip install -e '.[dev]')")
    run = subprocess.run([ruff, "check", "--no-cache", "--select", "I", "--output-format", "json", "--exit-zero", "."],
                         cwd=tree, capture_output=True, text=True, check=True)
    counts: dict[str, int] = {}
    for item in json.loads(run.stdout):
        rel = Path(item["filename"]).resolve().relative_to(tree.resolve()).as_posix()
        counts[rel] = counts.get(rel, 0) + 1
    return counts


def measure(name: str, target: str) -> dict:
    from migrator import api

    with tempfile.TemporaryDirectory(prefix="fix-isort-") as scratch:
        tree = Path(scratch) / name
        shutil.copytree(fetch_tree(PACKAGES[name].pin), tree)
        before = isort_findings(tree)
        outcome = api.fix([tree], root=tree, target=target, use_cache=False)
        after = isort_findings(tree)
        changed = {c for c in outcome.changed_files if c.endswith(".py")}
        new = sorted(f for f in changed if f not in before and f in after)
        return {"files": sum(1 for _ in tree.rglob("*.py")), "unsorted_before": len(before), "changed": len(changed),
                "new": new}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("-p", "--package", action="append", choices=sorted(PACKAGES))
    parser.add_argument("--target", choices=("npu", "portable"), default="npu")
    args = parser.parse_args()
    print(f"{'package':<12} {'.py':>5} {'unsorted before':>16} {'fixed':>6} {'newly unsorted':>15}")
    worst = 0
    for name in args.package or DEFAULT:
        row = measure(name, args.target)
        worst = max(worst, len(row["new"]))
        print(f"{name:<12} {row['files']:>5} {row['unsorted_before']:>16} {row['changed']:>6} {len(row['new']):>15}"
              + (f"  {', '.join(row['new'][:5])}" if row["new"] else ""))
    return 1 if worst else 0


if __name__ == "__main__":
    raise SystemExit(main())
