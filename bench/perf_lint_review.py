#!/usr/bin/env python3
"""Every fusion and perf finding on real training repositories, against verdicts read by eye (issue 42
acceptance 3: false ones under 10 %).

    python3 bench/perf_lint_review.py            # all packages: each finding, its verdict, the summary
    python3 bench/perf_lint_review.py -p litgpt  # one package
    python3 bench/perf_lint_review.py --unjudged # only findings without a verdict (after a rule change)

The packages are pinned sdists used by no other bench (`bench/sdists.py` fetches and checks them into the
cache outside the repository). Each is scanned with `--select FUS,PERF` (the static half; the census half
needs the program run). Each finding is printed as `package file:line CODE | source line | message` with its
verdict from `bench/data/perf_lint_review.json`, keyed by package, file, line and code; that file also keeps
the first run's false findings, with what fixed each. Prints findings per code, false count and rate.
Exit status 0 when every finding has a verdict, 1 when some have none (read them, then record them), 2
when it could not run.
"""

from __future__ import annotations

import argparse
import collections
import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

from sdists import BenchError, Pin, fetch_tree  # noqa: E402

VERDICTS = REPO / "bench" / "data" / "perf_lint_review.json"

# Digests as PyPI publishes them (https://pypi.org/pypi/<name>/<version>/json), pinned 2026-12-07.
PACKAGES: dict[str, Pin] = {
    pin.name: pin
    for pin in (
        Pin("litgpt", "0.5.13", "litgpt-0.5.13.tar.gz",
            "77be78814d0334e8e32ee6dac417e9718ebad45529458995ca255af24cf15cf3"),
        Pin("x-transformers", "2.31.10", "x_transformers-2.31.10.tar.gz",
            "17f2c50ccb0e2b93f83a84c1374ff7158ed3852310910d6fed26c925776ae403"),
        Pin("k-diffusion", "0.1.1.post1", "k-diffusion-0.1.1.post1.tar.gz",
            "04b66b0e95202a60c4c178a482e6d31528b81a1c97011d6023ed3ad559de7166"),
        Pin("denoising-diffusion-pytorch", "2.3.4", "denoising_diffusion_pytorch-2.3.4.tar.gz",
            "c6950c09367e9d05992d44bdeacc578803c64f3864205da959cf95c2774780f4"),
        Pin("openunmix", "1.3.0", "openunmix-1.3.0.tar.gz",
            "cc9245ce728700f5d0b72c67f01be4162777e617cdc47f9b035963afac180fc8"),
        Pin("lightning-bolts", "0.7.0", "lightning-bolts-0.7.0.tar.gz",
            "6071cda7721087890ba01523d6580fe72b03b842766fd5018a8eb9caa99fe75c"),
        Pin("vector-quantize-pytorch", "1.32.0", "vector_quantize_pytorch-1.32.0.tar.gz",
            "09ff42712e4084292c8150c25557313a883f4dce09f3b19602028b10132c1eca"),
    )
}


def findings(name: str, cache: Path | None) -> list[dict]:
    """The package's fusion and perf findings: package, file, line, code, source line, message."""
    from migrator import api

    tree = fetch_tree(PACKAGES[name], cache, log=lambda message: print(message, file=sys.stderr))
    result = api.scan([tree], root=tree, select=("FUS", "PERF"), use_cache=False)
    rows = []
    for f in result.findings:
        lines = (tree / f.path).read_text(encoding="utf-8", errors="replace").splitlines()
        source = lines[f.line - 1].strip() if 0 < f.line <= len(lines) else ""
        rows.append({"package": name, "file": f.path, "line": f.line, "code": f.code, "source": source,
                     "message": f.message})
    return rows


def key(row: dict) -> tuple[str, str, int, str]:
    return row["package"], row["file"], row["line"], row["code"]


def load_verdicts() -> tuple[dict[tuple[str, str, int, str], dict], dict]:
    """(verdicts by key, the whole document); a verdict is {"true": bool, "reason": str}."""
    doc = json.loads(VERDICTS.read_text(encoding="utf-8"))
    by_key = {}
    for package, file, line, code, true, reason in doc["verdicts"]:
        by_key[(package, file, line, code)] = {"true": true, "reason": reason}
    return by_key, doc


def report(rows: list[dict], verdicts: dict, only_unjudged: bool) -> tuple[int, int, int]:
    """Prints each finding with its verdict; (findings, false, unjudged)."""
    false = unjudged = 0
    for row in rows:
        verdict = verdicts.get(key(row))
        mark = "UNJUDGED" if verdict is None else "true" if verdict["true"] else "FALSE"
        unjudged += verdict is None
        false += verdict is not None and not verdict["true"]
        if only_unjudged and verdict is not None:
            continue
        reason = f" -- {verdict['reason']}" if verdict and verdict["reason"] else ""
        print(f"{mark:8} {row['package']} {row['file']}:{row['line']} {row['code']} | {row['source'][:100]}"
              f" | {row['message'][:90]}{reason}")
    return len(rows), false, unjudged


def summary(rows: list[dict], verdicts: dict, names: list[str], doc: dict) -> None:
    by_code = collections.Counter(row["code"] for row in rows)
    by_package = collections.Counter(row["package"] for row in rows)
    print()
    print("packages: " + ", ".join(f"{n} {PACKAGES[n].version} ({by_package[n]})" for n in names))
    print("findings per code: " + ", ".join(f"{c} {n}" for c, n in sorted(by_code.items())))
    seen = {key(row) for row in rows}
    gone = [k for k in verdicts if k[0] in names and k not in seen]
    if gone:
        print(f"{len(gone)} judged finding(s) no longer reported: " + "; ".join(f"{p} {f}:{n} {c}" for p, f, n, c in gone))
    first = doc.get("first_run", {})
    if first and set(names) == set(PACKAGES):
        fixed = first["false"]
        print(f"first run (at {first['commit']}): {first['findings']} findings, {len(fixed)} false "
              f"({len(fixed) / first['findings'] * 100:.1f} %)")
        for package, file, line, code, reason, fixed_by in fixed:
            print(f"  {package} {file}:{line} {code}: {reason} [{fixed_by}]")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-p", "--package", action="append", choices=sorted(PACKAGES))
    parser.add_argument("--unjudged", action="store_true", help="print only findings without a verdict")
    parser.add_argument("--cache", type=Path, default=None)
    args = parser.parse_args(argv)
    names = args.package or list(PACKAGES)
    try:
        verdicts, doc = load_verdicts()
        rows = [row for name in names for row in findings(name, args.cache)]
    except (BenchError, OSError, ValueError) as exc:
        print(f"could not run: {exc}", file=sys.stderr)
        return 2
    total, false, unjudged = report(rows, verdicts, args.unjudged)
    summary(rows, verdicts, names, doc)
    judged = total - unjudged
    rate = f"{false / judged * 100:.1f} %" if judged else "n/a"
    print(f"now: {total} findings, {false} false ({rate} of {judged} judged), {unjudged} without a verdict")
    return 1 if unjudged else 0


if __name__ == "__main__":
    sys.exit(main())
