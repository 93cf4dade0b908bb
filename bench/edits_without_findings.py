"""Files `migrate fix` would edit although the scan found nothing in them (issue 26: must be 0), per
corpus tree and target, and how many edited files are in a route's look-alike or outside the scan.

    python bench/edits_without_findings.py [TREE ...]   (default: the cached real_repos sdists)

Trees default to the unpacked sdists in the bench cache (bench/sdists.py; nothing is downloaded here).
Prints one line per tree and target: edited files, of which without a finding.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from migrator import api  # noqa: E402


def check(tree: Path, target: str) -> tuple[int, list[str]]:
    scanned = api.scan([tree], root=tree, use_cache=False)
    with_findings = {f.path for f in scanned.findings}
    outcome = api.fix([tree], root=tree, target=target, use_cache=False, write=False)
    edited = {c.path for c in outcome.plan.changes if c.changed and not c.path.endswith("_migrate_runtime.py")}
    return len(edited), sorted(edited - with_findings)


def main(argv: list[str]) -> int:
    from sdists import default_cache

    trees = [Path(a) for a in argv] or sorted(p for p in (default_cache() / "src").iterdir() if p.is_dir())
    bad = 0
    for tree in trees:
        for target in ("npu", "portable"):
            edited, stray = check(tree, target)
            bad += len(stray)
            print(f"{tree.name:24} {target:8} edited {edited:4}  without a finding {len(stray)}"
                  + (f"  {stray[:5]}" if stray else ""))
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
