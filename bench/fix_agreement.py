#!/usr/bin/env python3
"""Does `migrate fix` do exactly what `migrate scan` calls fixable?

    python3 bench/fix_agreement.py                      # fixtures, samples and the pinned sdists, both targets
    python3 bench/fix_agreement.py --local              # fixtures and samples only (no sdist cache needed)
    python3 bench/fix_agreement.py -p timm --target npu

For each tree and target, on a scratch copy: the sites `scan` marks fixable (a `fix` in the JSON, not
absorbed by a framework route), the edits `fix` applies, and the sites a re-scan after the fix still
marks fixable. It prints, per tree, "claimed fixable but not applied", "applied but not claimed" and
"still claiming a fix after the fix"; all three must be 0. Exit status 1 when one is not.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))

Site = tuple[str, str, int, int]  # path, code, line, column


@dataclass
class Agreement:
    name: str
    target: str
    claimed: set[Site] = field(default_factory=set)
    applied: set[Site] = field(default_factory=set)
    still_claimed: set[Site] = field(default_factory=set)
    reasons: dict[Site, str] = field(default_factory=dict)  # declined sites: the fixer's reason

    @property
    def claimed_not_applied(self) -> set[Site]:
        return self.claimed - self.applied

    @property
    def applied_not_claimed(self) -> set[Site]:
        return self.applied - self.claimed

    @property
    def agrees(self) -> bool:
        return not self.claimed_not_applied and not self.applied_not_claimed and not self.still_claimed

    def examples(self, n: int = 8) -> list[str]:
        out = [f"claimed, not applied: {s} {self.reasons.get(s, '(no declined entry)')}" for s in sorted(self.claimed_not_applied)[:n]]
        out += [f"applied, not claimed: {s}" for s in sorted(self.applied_not_claimed)[:n]]
        out += [f"still claims a fix after the fix: {s}" for s in sorted(self.still_claimed)[:n]]
        return out


def _fixable(result) -> set[Site]:
    return {(f.path, f.code, f.line, f.column) for f in result.findings
            if f.fix is not None and not (f.route and f.route.absorbs)}


def measure(tree: Path, target: str, work: Path, name: str | None = None) -> Agreement:
    """scan -> fix -> re-scan on a fresh copy of `tree` (a folder or one file)."""
    from migrator import api

    copy = work / f"{tree.name}-{target}"
    if tree.is_dir():
        shutil.copytree(tree, copy, ignore=shutil.ignore_patterns(".migrate", "__pycache__", "*.pyc"))
    else:
        copy.mkdir(parents=True)
        shutil.copy2(tree, copy / tree.name)
    (copy / "pyproject.toml").exists() or (copy / "pyproject.toml").write_text(f'[tool.migrate]\ntarget = "{target}"\n')
    scanned = api.scan([copy], use_cache=False, target=target)  # as `migrate scan` with `target` configured
    return agreement_of(name or tree.name, target, scanned, api.fix([copy], target=target, use_cache=False))


def agreement_of(name: str, target: str, scanned, outcome) -> Agreement:
    """The agreement of one scan (made with `target`) and the fix that followed it on the same tree."""
    from migrator.catalogue.loader import load_catalogue

    report = Agreement(name, target)
    report.claimed = _fixable(scanned)

    rules = load_catalogue().rules
    for change in outcome.plan.changes:
        if change.changed:  # a framework route's own edits (the adaptor import, the pin) answer no finding
            report.applied |= {(change.path, e.code, e.line, e.column) for e in change.edits if e.code in rules}
        for f, why in change.declined:
            report.reasons[(f.path, f.code, f.line, f.column)] = why
    report.still_claimed = _fixable(outcome.remaining)
    return report


def local_trees() -> list[Path]:
    """Every fixture (one file or folder each) and every sample."""
    trees: list[Path] = []
    for folder in sorted(REPO.glob("tests/fixtures*")):
        for family in sorted(p for p in folder.iterdir() if p.is_dir()):
            trees += sorted(p for p in family.iterdir() if p.is_dir() or p.suffix in (".py", ".sh", ".ipynb"))
    trees += sorted(p for p in (REPO / "samples").iterdir() if p.is_dir())
    return trees


def corpus_trees(names: list[str], work: Path) -> list[tuple[str, Path]]:
    from real_repos import PACKAGES, fetch_tree, scratch_copy

    out = []
    for name in names or list(PACKAGES):
        package = PACKAGES[name]
        tree = fetch_tree(package.pin)
        if package.subset:
            tree = scratch_copy(tree, package.subset, work / "subsets" / package.pin.tree_name)
        out.append((f"{package.pin.name}-{package.pin.version}", tree))
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("-p", "--package", action="append", default=[], help="one pinned sdist (repeatable)")
    parser.add_argument("--target", choices=("npu", "portable"), action="append")
    parser.add_argument("--local", action="store_true", help="fixtures and samples only")
    args = parser.parse_args(argv)
    targets = args.target or ["npu", "portable"]
    totals: Counter[str] = Counter()
    bad = []
    with tempfile.TemporaryDirectory(prefix="migrate-agreement-") as tmp:
        work = Path(tmp)
        trees = [] if args.package else [(p.relative_to(REPO).as_posix(), p) for p in local_trees()]
        if not args.local:
            trees += corpus_trees(args.package, work)
        print(f"{'tree':<48} {'target':<9} {'claimed':>7} {'applied':>7} {'claimed-not-applied':>19} "
              f"{'applied-not-claimed':>19} {'still-claimed':>13}")
        for i, (name, tree) in enumerate(trees):
            for target in targets:
                r = measure(tree, target, work / str(i), name)
                totals.update(claimed=len(r.claimed), applied=len(r.applied), cna=len(r.claimed_not_applied),
                              anc=len(r.applied_not_claimed), still=len(r.still_claimed))
                print(f"{name[-48:]:<48} {target:<9} {len(r.claimed):>7} {len(r.applied):>7} "
                      f"{len(r.claimed_not_applied):>19} {len(r.applied_not_claimed):>19} {len(r.still_claimed):>13}",
                      flush=True)
                if not r.agrees:
                    bad.append(r)
    print(f"{'total':<48} {'':<9} {totals['claimed']:>7} {totals['applied']:>7} {totals['cna']:>19} "
          f"{totals['anc']:>19} {totals['still']:>13}")
    for r in bad:
        print(f"\n{r.name} ({r.target}):")
        for line in r.examples():
            print("  " + line)
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
