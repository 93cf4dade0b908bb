#!/usr/bin/env python3
"""How far are `migrate scan` and `migrate fix` above their parse floors, and are they linear? Ratios only.

    python3 bench/scan_floor.py                  # all trees, median of 3 per measurement
    python3 bench/scan_floor.py -n 1 --trees megatron-core,timm
    python3 bench/scan_floor.py -n 1 --fix-only --against ../old-checkout   # fix only, old vs new interleaved
    python3 bench/scan_floor.py -n 1 --scan-only --against ../old-checkout  # scan only, old vs new interleaved

The trees are pinned sdists (`bench/real_repos.py` PACKAGES, fetched and checked by `bench/sdists.py`);
their `.py` files are spread over ¼, ½ and the whole (every file in a fixed, path-hashed order, so each
fraction is a sample of every tree) and copied to a temporary project. For each fraction, back to
back: the parse floor (`ast.parse` of every file in a child process, its CPU seconds), `migrate scan
--no-cache -j 1` (the child's CPU seconds and peak RSS, `os.wait4`), scan/floor (the median scan over the median
floor), `pairs` (the median of each run's scan over the floor measured right before it: steadier where the load
moves between runs), files/s and the linearity whole/½ (2.0 = linear). Absolute seconds depend on a shared, busy machine; the ratios,
measured in the same run, are what to compare. The children run with their bytecode compiled beforehand
(`PYTHONPYCACHEPREFIX` in the temporary folder), as an installed tool would.

`-j N` (default 2; 0: off): after each `-j 1` scan, the same scan with N workers (same JSON, checked): the wall
seconds of both, the speed-up (N = N-fold) and its CPU over `-j 1`'s (what the pool itself costs). Wall time is only
meaningful on a machine with N idle cores.

`fix --diff --no-cache` (writes nothing) is held against two floors, both printed: `fix/cst`, the
target's, is `libcst.parse_module` of the Python files it changes (a libcst rewriter must parse those;
files with nothing to fix should cost no libcst parse at all); `fix/all` adds the parse floor of every
file, since fix must find its sites (and count what remains) by scanning the whole tree: a fix can be no
cheaper than that sum. `--against CHECKOUT` also checks that the other checkout's diff and summary (its
stderr) are byte-identical.
"""

from __future__ import annotations

import argparse
import hashlib
import os
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
TREES = ("megatron-core", "deepspeed", "fairseq", "timm", "transformers")
FRACTIONS = (("1/4", 0.25), ("1/2", 0.5), ("whole", 1.0))
FLOOR = """
import ast, sys, warnings
warnings.simplefilter("ignore")
for path in open(sys.argv[1]).read().splitlines():
    try:
        ast.parse(open(path, "rb").read(), filename=path)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        pass
"""
LIBCST_FLOOR = """
import sys, libcst
for path in open(sys.argv[1]).read().splitlines():
    try:
        libcst.parse_module(open(path, "rb").read())
    except Exception:
        pass
"""


BYTECODE: dict[str, str] = {}  # "prefix": where the children's .pyc files go (set by `compile_bytecode`)


def compile_bytecode(prefix: Path, checkouts: list[Path]) -> None:
    """Untimed: every checkout's `migrator` and the libraries a scan imports compiled under `prefix`, as an
    installed tool has its bytecode (under `PYTHONDONTWRITEBYTECODE` each child would otherwise compile every
    module it imports, a start-up cost that differs between checkouts). The same warm-up leaves the built rule
    catalogue in the user's cache folder (`catalogue/rule_cache.py`), as any first run of an installed tool does."""
    BYTECODE["prefix"] = str(prefix)
    empty = prefix / "empty"
    empty.mkdir(parents=True)
    (empty / "m.py").write_text("import torch\nx = torch.zeros(2).cuda()\n")
    # what the parts hold beside Python files, so the libraries that read them (imported only where
    # needed) are compiled too
    (empty / "pyproject.toml").write_text('[project]\nname = "m"\n')
    (empty / ".gitignore").write_text("*.pyc\n")
    for code in checkouts:
        child([sys.executable, "-m", "compileall", "-q", str(code / "migrator")], code=code)
        child([sys.executable, "-m", "migrator", "scan", str(empty), "--root", str(empty), "--no-cache", "-q"],
              code=code)


def child(argv: list[str], stdout: Path | None = None, code: Path = REPO) -> tuple[float, float, str, float]:
    """(CPU seconds, peak RSS MiB, stderr, wall seconds) of one child process run to its end (its pool's workers
    included), importing the `migrator` of `code`; its output kept in `stdout`."""
    env = {**os.environ, "NO_COLOR": "1", "CI": "1", "PYTHONPATH": str(code)}
    if BYTECODE:
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        env["PYTHONPYCACHEPREFIX"] = BYTECODE["prefix"]
    sink = open(stdout, "wb") if stdout else subprocess.DEVNULL  # noqa: SIM115 - closed below
    # run outside any checkout: `python -m` puts the working folder first on sys.path, before PYTHONPATH
    start = time.perf_counter()
    proc = subprocess.Popen(argv, env=env, stdout=sink, stderr=subprocess.PIPE, cwd=tempfile.gettempdir())
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    if stdout:
        sink.close()  # type: ignore[union-attr]
    proc.returncode = os.waitstatus_to_exitcode(status)
    err = proc.stderr.read().decode(errors="replace") if proc.stderr else ""
    if proc.returncode not in (0, 1):  # 1: findings
        raise BenchError(f"{argv[:4]} exited {proc.returncode}: {err[-2000:]}")
    return usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024, err, wall


def all_files(trees: list[str]) -> list[tuple[str, Path, Path]]:
    """(tree, source root, file) for every .py file, in a fixed order independent of the trees' layout."""
    files = []
    for name in trees:
        root = fetch_tree(PACKAGES[name].pin, log=lambda m: print(m, file=sys.stderr))
        files.extend((name, root, p) for p in root.rglob("*.py") if p.is_file())
    return sorted(files, key=lambda f: hashlib.sha256(f"{f[0]}/{f[2].relative_to(f[1])}".encode()).hexdigest())


def project(folder: Path, files: list[tuple[str, Path, Path]]) -> list[Path]:
    folder.mkdir(parents=True)
    (folder / "pyproject.toml").write_text('[project]\nname = "scan-floor"\nversion = "0"\n')
    copied = []
    for name, root, path in files:
        target = folder / name / path.relative_to(root)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, target)
        copied.append(target)
    return copied


def measure(folder: Path, copied: list[Path], runs: int, fix_only: bool = False,
            against: Path | None = None, scan_only: bool = False, jobs: int = 0) -> dict[str, float]:
    listing = folder.parent / f"{folder.name}.files"
    listing.write_text("\n".join(map(str, copied)))
    diff, changed = folder.parent / f"{folder.name}.diff", folder.parent / f"{folder.name}.changed"
    floor, scan, fix, cst, old, old_scan, peak, fix_peak, old_peak = [], [], [], [], [], [], 0.0, 0.0, 0.0
    wall_1, wall_n, cpu_n = [], [], []  # `-j 1` and `-j N` scans of this checkout: wall s, and -j N's CPU s
    scan_argv = [sys.executable, "-m", "migrator", "scan", str(folder), "--root", str(folder), "--no-cache", "-j", "1",
                 "-q", "--format", "json", "--exit-zero", "--route", "none"]
    report = folder.parent / f"{folder.name}.json"
    fix_argv = [sys.executable, "-m", "migrator", "fix", str(folder), "--root", str(folder), "--no-cache", "--diff",
                "--route", "none"]
    for _ in range(runs):  # floor and scan back to back, so both see the same machine load
        floor.append(child([sys.executable, "-c", FLOOR, str(listing)])[0])  # also part of fix's whole floor
        if not fix_only:
            if against is not None and scan_only:  # the other checkout's scan, right before this one's
                old_scan.append(child(scan_argv, stdout=report, code=against)[0])
                before = report.read_bytes()
            cpu, rss, _, wall = child(scan_argv, stdout=report)
            scan.append(cpu)
            peak = max(peak, rss)
            if against is not None and scan_only and report.read_bytes() != before:
                raise BenchError(f"scan --format json differs from {against}'s on {folder}")
            if jobs:  # the same scan in a pool of `jobs` workers, right after: its wall time against -j 1's
                single = report.read_bytes()
                wall_1.append(wall)
                at = scan_argv.index("-j") + 1
                cpu, _, _, wall = child(scan_argv[:at] + [str(jobs)] + scan_argv[at + 1:], stdout=report)
                wall_n.append(wall)
                cpu_n.append(cpu)
                if report.read_bytes() != single:
                    raise BenchError(f"scan -j {jobs} --format json differs from -j 1's on {folder}")
        if scan_only:
            continue
        if against is not None:  # the other checkout's fix, right before this one's (same load)
            old_cpu, old_rss, old_err, _ = child(fix_argv, stdout=diff, code=against)
            old.append(old_cpu)
            old_peak = max(old_peak, old_rss)
            before = diff.read_bytes()
        cpu, rss, err, _ = child(fix_argv, stdout=diff)
        fix.append(cpu)
        fix_peak = max(fix_peak, rss)
        if against is not None and (diff.read_bytes() != before or err != old_err):  # the diff, and the summary
            raise BenchError(f"fix --diff differs from {against}'s on {folder}")
        changed.write_text("\n".join(str(folder / line[6:]) for line in diff.read_text(errors="replace").splitlines()
                                      if line.startswith("+++ b/") and line.endswith(".py")))
        cst.append(child([sys.executable, "-c", LIBCST_FLOOR, str(changed)])[0])
    f, s, x, c = (statistics.median(v) if v else float("nan") for v in (floor, scan, fix, cst))
    o, os_ = (statistics.median(v) if v else float("nan") for v in (old, old_scan))
    # each run's scan over the floor measured right before it: a load that moves between runs cancels out
    pairs, old_pairs = (statistics.median(a / b for a, b in zip(v, floor)) if v else float("nan")
                        for v in (scan, old_scan))
    return {"files": len(copied), "floor": f, "scan": s, "ratio": s / f, "files_per_s": len(copied) / s, "peak": peak,
            "changed": len(changed.read_text().splitlines()) if changed.exists() else float("nan"), "cst": c,
            "fix": x, "fix_ratio": x / c, "fix_all": x / (f + c), "fix_peak": fix_peak, "old": o, "old_ratio": o / c,
            "old_all": o / (f + c), "old_peak": old_peak,
            "old_scan": os_, "old_scan_ratio": os_ / f, "pairs": pairs, "old_pairs": old_pairs, **_parallel(wall_1, wall_n, cpu_n, s)}


def _parallel(wall_1: list[float], wall_n: list[float], cpu_n: list[float], cpu_1: float) -> dict[str, float]:
    """Wall s of the `-j 1` and `-j N` scans, the speed-up, and -j N's CPU s over -j 1's (the pool's own cost)."""
    w1, wn, cn = (statistics.median(v) if v else float("nan") for v in (wall_1, wall_n, cpu_n))
    return {"wall_1": w1, "wall_n": wn, "speedup": w1 / wn, "cpu_n_ratio": cn / cpu_1}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("-n", "--runs", type=int, default=3, help="runs per measurement (median)")
    ap.add_argument("--trees", default=",".join(TREES), help="comma-separated PACKAGES names")
    ap.add_argument("--fix-only", action="store_true", help="measure fix and its libcst floor only (no scan)")
    ap.add_argument("--scan-only", action="store_true", help="measure the floor and scan only (no fix)")
    ap.add_argument("--against", type=Path, metavar="CHECKOUT",
                    help="also run another checkout's fix (with --scan-only: scan) before each one (same load; its "
                         "output must be the same)")
    ap.add_argument("-j", "--jobs", type=int, default=2, metavar="N",
                    help="also scan with -j N after each -j 1 scan: wall seconds and speed-up (0: not)")
    args = ap.parse_args()
    jobs = 0 if args.fix_only else args.jobs
    try:
        files = all_files(args.trees.split(","))
    except BenchError as exc:
        print(f"scan_floor: {exc}", file=sys.stderr)
        return 2
    print(f"trees: {args.trees} ({len(files)} .py files); median of {args.runs}; CPU seconds of the child")
    fix_head = f" | {'changed':>7} {'cst s':>6} {'fix s':>7} {'fix/cst':>7} {'fix/all':>7} {'fix MiB':>7}"
    print(f"{'part':>6} {'files':>6} {'floor s':>8} {'scan s':>8} {'scan/floor':>10} {'pairs':>6} {'files/s':>8} {'peak MiB':>9}"
          + ("" if args.scan_only else fix_head)
          + (f" | {'old scan s':>10} {'old/floor':>9} {'pairs':>6}" if args.against and args.scan_only else "")
          + (f" | {'old fix s':>9} {'old/cst':>7} {'old/all':>7} {'old MiB':>7}" if args.against and not args.scan_only else "")
          + (f" | {'j1 wall':>7} {f'j{jobs} wall':>7} {'speed-up':>8} {f'j{jobs} CPU/j1':>9}" if jobs else ""))
    rows: dict[str, dict[str, float]] = {}
    with tempfile.TemporaryDirectory(prefix="scan-floor-") as tmp:
        compile_bytecode(Path(tmp) / "pycache", [REPO, *([args.against] if args.against else [])])
        for label, share in FRACTIONS:
            part = files[: round(len(files) * share)]
            folder = Path(tmp) / label.replace("/", "of")
            row = rows[label] = measure(folder, project(folder, part), args.runs, args.fix_only, args.against,
                                        args.scan_only, jobs)
            fix_row = (f" | {row['changed']:>7.0f} {row['cst']:>6.2f} {row['fix']:>7.2f} {row['fix_ratio']:>7.2f} "
                       f"{row['fix_all']:>7.2f} {row['fix_peak']:>7.0f}")
            print(f"{label:>6} {row['files']:>6.0f} {row['floor']:>8.2f} {row['scan']:>8.2f} {row['ratio']:>10.2f} {row['pairs']:>6.2f} "
                  f"{row['files_per_s']:>8.0f} {row['peak']:>9.0f}" + ("" if args.scan_only else fix_row)
                  + (f" | {row['old_scan']:>10.2f} {row['old_scan_ratio']:>9.2f} {row['old_pairs']:>6.2f}" if args.against and args.scan_only
                     else "")
                  + (f" | {row['old']:>9.2f} {row['old_ratio']:>7.2f} {row['old_all']:>7.2f} {row['old_peak']:>7.0f}" if args.against and not args.scan_only
                     else "")
                  + (f" | {row['wall_1']:>7.2f} {row['wall_n']:>7.2f} {row['speedup']:>8.2f} {row['cpu_n_ratio']:>9.2f}"
                     if jobs else ""), flush=True)
    fix_line = (f", fix {rows['whole']['fix'] / rows['1/2']['fix']:.2f}, "
                f"libcst floor {rows['whole']['cst'] / rows['1/2']['cst']:.2f}, ast + libcst floor "
                f"{(rows['whole']['floor'] + rows['whole']['cst']) / (rows['1/2']['floor'] + rows['1/2']['cst']):.2f}")
    print(f"linearity whole/half: floor {rows['whole']['floor'] / rows['1/2']['floor']:.2f}, "
          f"scan {rows['whole']['scan'] / rows['1/2']['scan']:.2f}" + ("" if args.scan_only else fix_line)
          + " (2.00 = linear)"
          + (f", old scan {rows['whole']['old_scan'] / rows['1/2']['old_scan']:.2f}" if args.against and args.scan_only
             else "")
          + (f", old fix {rows['whole']['old'] / rows['1/2']['old']:.2f}" if args.against and not args.scan_only
             else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
