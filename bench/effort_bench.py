#!/usr/bin/env python3
"""The report's effort figures on the samples and on pinned real repositories (issue 18).

    python3 bench/effort_bench.py                    # samples/ (gpt, moe, resnet) and their golden ports
    python3 bench/effort_bench.py -p megatron-core -p timm --route auto --route none

For each tree: findings, CUDA-dependent sites, manual items, the estimate, and the optional
(guarded) imports, exactly as `migrate report` computes them (`build_context`). Real trees come
from the pinned sdists of bench/real_repos.py (downloaded once into the bench cache).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))


def figures(tree: Path, route: str) -> dict:
    from migrator import api
    from migrator.reporters.report import build_context

    settings, resolved = api.resolve_settings([tree], root=tree, use_cache=False, route=route)
    ctx = build_context(api.report(resolved, settings=settings))
    return {
        "groups": [(g["code"], g["effort_note"]) for g in ctx["manual_groups"]],
        "findings": ctx["n_findings"],
        "cuda_sites": ctx["n_core"],
        "manual_items": ctx["n_manual"],
        "effort": ctx["effort_total"],
        "optional_imports": sum(o["count"] for o in ctx.get("optional_imports", ())),
        "optional_libraries": len(ctx.get("optional_imports", ())),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-p", "--package", action="append", default=[], help="a package of bench/real_repos.py")
    parser.add_argument("--tree", action="append", default=[], help="any folder")
    parser.add_argument("--route", action="append", default=[], help="auto | none | ... (default auto)")
    parser.add_argument("--actions", action="store_true", help="also list the actions per rule (for docs/effort.md)")
    args = parser.parse_args()
    sys.path.insert(0, str(REPO))
    trees: list[tuple[str, Path]] = [(t, Path(t)) for t in args.tree]
    if args.package:
        from real_repos import PACKAGES
        from sdists import fetch_tree

        for name in args.package:
            trees.append((name, fetch_tree(PACKAGES[name].pin)))
    if not trees:
        for sample in sorted(p for p in (REPO / "samples").iterdir() if p.is_dir()):
            trees.append((f"samples/{sample.name}", sample))
            golden = REPO / "tests" / "golden" / sample.name / "npu"
            if golden.is_dir():
                trees.append((f"golden/{sample.name}/npu", golden))
    print(f"{'tree':<28} {'route':<6} {'findings':>8} {'CUDA sites':>10} {'manual items':>12} {'effort':>8} "
          f"{'optional imports (libraries)':>28}")
    for label, tree in trees:
        for route in args.route or ["auto"]:
            f = figures(tree, route)
            print(f"{label:<28} {route:<6} {f['findings']:>8} {f['cuda_sites']:>10} {f['manual_items']:>12} "
                  f"{f['effort']:>8} {f['optional_imports']:>20} ({f['optional_libraries']})")
            if args.actions:
                for code, note in f["groups"]:
                    print(f"    {code}: {note}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
