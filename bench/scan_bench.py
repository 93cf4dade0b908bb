#!/usr/bin/env python3
"""Scan benchmark on a pinned, real third-party code base (megatron-core 0.12.1 sdist).

    python3 bench/scan_bench.py                  # 5 repetitions, medians
    python3 bench/scan_bench.py -n 9 --json out.json

What it does (see bench/README.md for the details):

1. Downloads the pinned sdist from PyPI into the cache folder outside the repository
   (`bench/sdists.py`: sha256 checked, any mismatch refused) and unpacks it there, path-traversal
   safe; nothing is ever committed.
3. Times the CLI in subprocesses (what a user feels, interpreter start-up included) and the
   in-process `migrator.api.scan(...)` call: cold (`--no-cache`, fresh MIGRATE_CACHE_DIR), warm
   (cache primed once, then re-used), one explicit file (the pre-commit case), and import time
   (`python3 -X importtime`) of `--help`, `rules`, `rule DEV001` and `scan` of a file with no
   accelerator markers, checking that libcst and torch are not imported by those.

Targets are reported, never asserted: cold <= 10 s, warm <= 1 s, one explicit file <= 0.5 s.
Exit status: 0 when the measurements ran (targets met or not), 2 when they could not run.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from sdists import BenchError, Pin, default_cache, fetch_tree

REPO = Path(__file__).resolve().parent.parent

# The pinned input. The digest is the one PyPI publishes for this file (checked against
# https://pypi.org/simple/megatron-core/ when it was pinned); change all three together.
PACKAGE = "megatron-core"
VERSION = "0.12.1"
SDIST = "megatron_core-0.12.1.tar.gz"
SHA256 = "11c40a1a26713951eaae6f73d5944f921db427cedd0e29b891102685a96d662f"

# One ordinary module of that tree for the explicit-file (pre-commit) case.
ONE_FILE = "megatron/core/transformer/transformer_layer.py"

TARGETS = {"cold": 10.0, "warm": 1.0, "one_file": 0.5}
HEAVY_MODULES = ("libcst", "torch")
# A file with nothing for the scanner to find (no accelerator names at all).
PLAIN_SOURCE = '"""A plain module."""\n\n\ndef add(a, b):\n    return a + b\n'


# -- input --------------------------------------------------------------------------------------
MEGATRON = Pin(PACKAGE, VERSION, SDIST, SHA256)


def plain_project(cache: Path) -> Path:
    """A one-file project (its own pyproject.toml, so it is its own scan root) with no markers."""
    folder = cache / "plain"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "pyproject.toml").write_text('[project]\nname = "plain"\nversion = "0"\n')
    path = folder / "plain.py"
    path.write_text(PLAIN_SOURCE)
    return path


def count_input(tree: Path) -> tuple[int, int]:
    """(files, lines) the scanner reads in `tree`, found the way the scanner finds them.

    Runs in the worker interpreter (see `worker_main`), never in the parent, so the parent
    imports nothing from `migrator` and the in-process timings start from a fresh interpreter.
    """
    try:
        from migrator.api import resolve_settings
        from migrator.engine.discover import Candidate, discover

        settings, resolved = resolve_settings([tree])
        files = [c.path for c in discover(settings.root, resolved, None) if isinstance(c, Candidate)]
    except Exception:  # noqa: BLE001 - the engine is being edited; fall back to a plain walk
        suffixes = {".py", ".sh", ".bash", ".zsh", ".cu", ".cuh"}
        files = [p for p in tree.rglob("*") if p.is_file() and (p.suffix in suffixes or p.name == "pyproject.toml")]
    lines = 0
    for path in files:
        try:
            lines += path.read_bytes().count(b"\n")
        except OSError:
            pass
    return len(files), lines


# -- timing -------------------------------------------------------------------------------------
@dataclass
class Series:
    name: str
    times: list[float] = field(default_factory=list)
    files: int = 0
    lines: int = 0
    target: float | None = None
    note: str = ""

    @property
    def median(self) -> float:
        return statistics.median(self.times)

    def as_dict(self) -> dict:
        med = self.median
        return {
            "name": self.name,
            "runs": len(self.times),
            "times_s": [round(t, 4) for t in self.times],
            "median_s": round(med, 4),
            "min_s": round(min(self.times), 4),
            "max_s": round(max(self.times), 4),
            "files": self.files,
            "lines": self.lines,
            "files_per_s": round(self.files / med, 1) if self.files and med else None,
            "lines_per_s": round(self.lines / med) if self.lines and med else None,
            "target_s": self.target,
            "meets_target": (med <= self.target) if self.target is not None else None,
            "note": self.note,
        }


BYTECODE: dict[str, str | None] = {"prefix": None}  # set by main(): where .pyc files go


def cli_env(cache_dir: Path) -> dict[str, str]:
    env = dict(os.environ)
    env["MIGRATE_CACHE_DIR"] = str(cache_dir)
    if BYTECODE["prefix"]:
        # like an installed tool (pip compiles .pyc at install time), without writing into the repo
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        env["PYTHONPYCACHEPREFIX"] = BYTECODE["prefix"]
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), *filter(None, [env.get("PYTHONPATH")])])
    env.pop("MIGRATE_DEBUG", None)
    env["NO_COLOR"] = "1"
    env["CI"] = "1"  # no progress bar
    return env


def run_cli(args: list[str], cache_dir: Path, python_flags: tuple[str, ...] = ()) -> tuple[float, subprocess.CompletedProcess]:
    cmd = [sys.executable, *python_flags, "-m", "migrator", *args]
    start = time.perf_counter()
    proc = subprocess.run(cmd, cwd=REPO, env=cli_env(cache_dir), capture_output=True, text=True)
    elapsed = time.perf_counter() - start
    if proc.returncode not in (0, 1):  # 1 = findings
        raise BenchError(f"`{' '.join(cmd)}` exited {proc.returncode}:\n{proc.stderr.strip()[-2000:]}")
    return elapsed, proc


def scan_args(paths: list[Path], out: Path, jobs: int | None, no_cache: bool) -> list[str]:
    args = ["scan", *map(str, paths), "--format", "json", "-o", str(out), "--exit-zero"]
    if no_cache:
        args.append("--no-cache")
    if jobs is not None:
        args += ["--jobs", str(jobs)]
    return args


def bench_cli(tree: Path, one_file: Path, reps: int, jobs: int | None, work: Path, files: int, lines: int, log) -> dict[str, Series]:
    out = work / "report.json"
    cold = Series("CLI cold (--no-cache, fresh cache dir)", files=files, lines=lines, target=TARGETS["cold"])
    prime = Series("CLI first run with cache (cold + write)", files=files, lines=lines)
    warm = Series("CLI warm (cache hit)", files=files, lines=lines, target=TARGETS["warm"])
    one_cold = Series("CLI one explicit file, --no-cache", files=1, target=TARGETS["one_file"])
    one_warm = Series("CLI one explicit file, warm cache", files=1, target=TARGETS["one_file"])
    one_lines = one_file.read_bytes().count(b"\n")
    one_cold.lines = one_warm.lines = one_lines

    for i in range(reps):
        fresh = Path(tempfile.mkdtemp(dir=work, prefix="cold-"))
        t, _ = run_cli(scan_args([tree], out, jobs, no_cache=True), fresh)
        cold.times.append(t)
        if i == 0:
            scanned = json.loads(out.read_text())["summary"]
            cold.note = f"{scanned['files_scanned']} files scanned, {scanned['findings']} findings"
            if any(f.endswith(".pickle") for f in os.listdir(fresh)):
                cold.note += "; WARNING: --no-cache wrote a cache file"
        log(f"  cold {i + 1}/{reps}: {t:.3f} s")

    # "first run with cache": a fresh cache dir each time (cold scan + writing the cache);
    # "warm": one cache dir primed once, then every run is all hits
    cache_dir = Path(tempfile.mkdtemp(dir=work, prefix="warm-"))
    for _ in range(reps):
        prime_dir = Path(tempfile.mkdtemp(dir=work, prefix="prime-"))
        t, _ = run_cli(scan_args([tree], out, jobs, no_cache=False), prime_dir)
        prime.times.append(t)
    run_cli(scan_args([tree], out, jobs, no_cache=False), cache_dir)
    cold_report = json.loads(out.read_text())
    for i in range(reps):
        t, _ = run_cli(scan_args([tree], out, jobs, no_cache=False), cache_dir)
        warm.times.append(t)
        log(f"  warm {i + 1}/{reps}: {t:.3f} s")
    warm_report = json.loads(out.read_text())
    if cold_report["findings"] != warm_report["findings"]:
        warm.note = "WARNING: warm findings differ from the cold run"
    else:
        warm.note = "findings identical to the cold run"

    for _ in range(reps):
        fresh = Path(tempfile.mkdtemp(dir=work, prefix="one-"))
        t, _ = run_cli(scan_args([one_file], out, jobs, no_cache=True), fresh)
        one_cold.times.append(t)
        t, _ = run_cli(scan_args([one_file], out, jobs, no_cache=False), cache_dir)
        one_warm.times.append(t)
    one_cold.note = f"{one_file.relative_to(tree)} ({one_lines} lines)"
    one_warm.note = "cache primed by the whole-tree run (the file's root cache is loaded)"
    return {"cold": cold, "prime": prime, "warm": warm, "one_cold": one_cold, "one_warm": one_warm}


def bench_api(tree: Path, one_file: Path, reps: int, jobs: int | None, work: Path, mode: str) -> tuple[dict[str, Series], int, int]:
    """The in-process `api.scan()` call (what an IDE plug-in or test harness pays, no start-up),
    timed in a fresh worker interpreter; also counts the input files and lines there."""
    cache_dir = Path(tempfile.mkdtemp(dir=work, prefix="api-"))
    cmd = [sys.executable, str(Path(__file__).resolve()), "--_worker", str(tree), str(one_file), str(reps),
           "none" if jobs is None else str(jobs), mode]
    proc = subprocess.run(cmd, cwd=REPO, env=cli_env(cache_dir), capture_output=True, text=True)
    if proc.returncode != 0:
        raise BenchError(f"in-process worker failed (exit {proc.returncode}):\n{proc.stderr.strip()[-2000:]}")
    data = json.loads(proc.stdout)
    series = {}
    for key, raw in data["series"].items():
        s = Series(raw["name"], raw["times"], raw["files"], raw["lines"], raw["target"], raw["note"])
        series[key] = s
    return series, data["files"], data["lines"]


def worker_main(tree: str, one_file: str, reps: str, jobs: str, mode: str) -> int:
    sys.path.insert(0, str(REPO))
    tree_p, one_p, n = Path(tree), Path(one_file), int(reps)
    out: dict = {"series": {}}
    if mode == "api":
        t0 = time.perf_counter()
        from migrator import api

        import_s = time.perf_counter() - t0
    files, lines = count_input(tree_p)
    out.update(files=files, lines=lines)
    if mode == "api":
        overrides = {"jobs": int(jobs)} if jobs != "none" else {}
        one_lines = one_p.read_bytes().count(b"\n")
        specs = {
            "api_first": ("api.scan() first call (catalogue load, lazy imports)", files, lines, None),
            "api_cold": ("api.scan() cold (use_cache=False)", files, lines, TARGETS["cold"]),
            "api_warm": ("api.scan() warm (cache hit)", files, lines, TARGETS["warm"]),
            "api_one": ("api.scan() one explicit file, no cache", 1, one_lines, TARGETS["one_file"]),
        }
        times: dict[str, list[float]] = {k: [] for k in specs}

        def timed(key: str, paths: list[Path], use_cache: bool) -> None:
            t = time.perf_counter()
            api.scan(paths, use_cache=use_cache, **overrides)
            times[key].append(time.perf_counter() - t)

        timed("api_first", [tree_p], False)
        for _ in range(n):
            timed("api_cold", [tree_p], False)
        api.scan([tree_p], use_cache=True, **overrides)  # prime the cache
        for _ in range(n):
            timed("api_warm", [tree_p], True)
        for _ in range(n):
            timed("api_one", [one_p], False)
        notes = {"api_first": f"after `from migrator import api` ({import_s:.3f} s)"}
        for key, (name, f, ln, target) in specs.items():
            out["series"][key] = {"name": name, "times": times[key], "files": f, "lines": ln,
                                  "target": target, "note": notes.get(key, "")}
    json.dump(out, sys.stdout)
    return 0


def parse_importtime(stderr: str) -> tuple[float, list[str], list[tuple[str, float]]]:
    """(total seconds = sum of `self`, imported module names, top-level modules by cumulative)."""
    total_us = 0
    names: list[str] = []
    top: list[tuple[str, float]] = []
    for line in stderr.splitlines():
        if not line.startswith("import time:") or "self [us]" in line:
            continue
        try:
            _, rest = line.split(":", 1)
            self_us, cum_us, name = (part for part in rest.split("|", 2))
            total_us += int(self_us)
        except ValueError:
            continue
        stripped = name.strip()
        names.append(stripped)
        if name.startswith(" ") and not name.startswith("  "):  # one space: a top-level import
            top.append((stripped, int(cum_us) / 1e6))
    top.sort(key=lambda item: -item[1])
    return total_us / 1e6, names, top[:5]


def bench_imports(plain: Path, reps: int, work: Path) -> list[dict]:
    cases = [
        ("--help", ["--help"]),
        ("rules", ["rules"]),
        ("rule DEV001", ["rule", "DEV001"]),
        ("scan <file without markers>", ["scan", str(plain), "--no-cache"]),
    ]
    rows = []
    for label, args in cases:
        cache_dir = Path(tempfile.mkdtemp(dir=work, prefix="imp-"))
        _, proc = run_cli(args, cache_dir, ("-X", "importtime"))
        total, names, top = parse_importtime(proc.stderr)
        heavy = sorted({n.split(".", 1)[0] for n in names if n.split(".", 1)[0] in HEAVY_MODULES})
        walls = [run_cli(args, cache_dir)[0] for _ in range(reps)]
        rows.append(
            {
                "command": "python3 -m migrator " + " ".join(a if a != str(plain) else "plain.py" for a in args),
                "label": label,
                "import_total_s": round(total, 4),
                "modules_imported": len(names),
                "heavy_imported": heavy,
                "top_cumulative": [(n, round(s, 4)) for n, s in top],
                "wall_median_s": round(statistics.median(walls), 4),
            }
        )
    return rows


def loadavg() -> float | None:
    try:
        return round(os.getloadavg()[0], 2)
    except OSError:
        return None


# -- report -------------------------------------------------------------------------------------
def fmt_rate(value) -> str:
    if value is None:
        return "-"
    return f"{value:,.0f}" if value >= 100 else f"{value:.1f}"


def print_table(results: dict, out=sys.stdout) -> None:
    w = out.write
    meta = results["meta"]
    w(f"\nascend-migrate scan benchmark: {meta['package']} {meta['version']} "
      f"({meta['files']} files, {meta['lines']:,} lines), {meta['reps']} runs each, medians\n")
    w(f"python {meta['python']}, {meta['cpus']} CPUs, --jobs {meta['jobs']}, bytecode {meta['bytecode']}\n\n")
    header = f"{'measurement':<58} {'median s':>9} {'min s':>7} {'max s':>7} {'files/s':>8} {'lines/s':>10} {'target':>8}\n"
    before, after = meta["loadavg_1min_before_after"]
    if max(before or 0, after or 0) > 0.5:
        w(f"WARNING: the machine was busy (1-min load average {before} before, {after} after); "
          "figures include that contention\n\n")
    w(header)
    w("-" * (len(header) - 1) + "\n")
    for s in results["series"]:
        target = "-"
        if s["target_s"] is not None:
            target = f"{'ok' if s['meets_target'] else 'MISS'} {s['target_s']:g}"
        w(
            f"{s['name']:<58} {s['median_s']:>9.3f} {s['min_s']:>7.3f} {s['max_s']:>7.3f} "
            f"{fmt_rate(s['files_per_s']):>8} {fmt_rate(s['lines_per_s']):>10} {target:>8}\n"
        )
    w("\nratios (same run, medians)\n")
    for name, value in results["ratios"].items():
        w(f"  {name:<56} {value:>7.1f}x\n")
    w("\nimport time (python3 -X importtime; total = sum of `self`) and wall time, median\n")
    for row in results["imports"]:
        heavy = ", ".join(row["heavy_imported"]) or "none"
        w(f"  {row['label']:<30} import {row['import_total_s']:.3f} s ({row['modules_imported']} modules), "
          f"wall {row['wall_median_s']:.3f} s, libcst/torch imported: {heavy}\n")
    notes = [s for s in results["series"] if s["note"]]
    if notes:
        w("\nnotes\n")
        for s in notes:
            w(f"  {s['name']}: {s['note']}\n")
    w("\n")


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--_worker"]:
        return worker_main(*argv[1:])
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("-n", "--reps", type=int, default=5, help="repetitions per measurement (default 5)")
    parser.add_argument("--cache", type=Path, default=None, help="download/unpack folder (default $MIGRATE_BENCH_CACHE or ~/.cache/ascend-migrate-bench)")
    parser.add_argument("--jobs", type=int, default=None, help="pass --jobs N to the scanner (default: its own default)")
    parser.add_argument("--json", type=Path, help="also write the results as JSON to this file")
    parser.add_argument("--skip-api", action="store_true", help="skip the in-process api.scan() timings")
    parser.add_argument("--quiet", "-q", action="store_true", help="no progress lines")
    parser.add_argument(
        "--no-bytecode",
        action="store_true",
        help="honour PYTHONDONTWRITEBYTECODE as set (default: compile .pyc under the cache folder, "
        "as an installed tool has them)",
    )
    args = parser.parse_args(argv)
    if args.reps < 1:
        parser.error("--reps must be at least 1")

    def log(message: str) -> None:
        if not args.quiet:
            print(message, file=sys.stderr, flush=True)

    cache = (args.cache or default_cache()).absolute()
    try:
        tree = fetch_tree(MEGATRON, cache, log)
        one_file = tree / ONE_FILE
        if not one_file.is_file():
            raise BenchError(f"{ONE_FILE} missing from the unpacked tree")
        plain = plain_project(cache)
        if not args.no_bytecode:
            BYTECODE["prefix"] = str(cache / "pycache")
        work = Path(tempfile.mkdtemp(prefix="scan-bench-"))
        load_before = loadavg()
        try:
            # warm-up: .pyc compiled, files in the page cache; not timed
            run_cli(["--help"], work)
            run_cli(scan_args([tree], work / "warmup.json", args.jobs, no_cache=True), work)
            if not args.skip_api:
                log("timing migrator.api.scan() in a fresh interpreter ...")
            mode = "count" if args.skip_api else "api"
            try:
                api_series, files, lines = bench_api(tree, one_file, args.reps, args.jobs, work, mode)
            except BenchError as exc:
                if mode == "count":
                    raise
                log(f"warning: in-process timings skipped: {exc}")
                api_series, files, lines = bench_api(tree, one_file, args.reps, args.jobs, work, "count")
            log(f"timing the CLI on {tree} ({files} files, {lines:,} lines) ...")
            series = bench_cli(tree, one_file, args.reps, args.jobs, work, files, lines, log)
            series.update(api_series)
            log("measuring import time ...")
            imports = bench_imports(plain, args.reps, work)
            load_after = loadavg()
        finally:
            shutil.rmtree(work, ignore_errors=True)
    except BenchError as exc:
        print(f"scan_bench: error: {exc}", file=sys.stderr)
        return 2

    ratios = {"CLI cold / CLI warm": series["cold"].median / series["warm"].median}
    ratios["CLI one file (--no-cache) / CLI one file (warm)"] = series["one_cold"].median / series["one_warm"].median
    if "api_cold" in series:
        ratios["api cold / api warm"] = series["api_cold"].median / series["api_warm"].median
        ratios["CLI cold / api cold (start-up + output overhead)"] = series["cold"].median / series["api_cold"].median
    results = {
        "meta": {
            "package": PACKAGE,
            "version": VERSION,
            "sdist": SDIST,
            "sha256": SHA256,
            "tree": str(tree),
            "files": files,
            "lines": lines,
            "reps": args.reps,
            "jobs": args.jobs if args.jobs is not None else "default",
            "python": platform.python_version(),
            "cpus": os.cpu_count(),
            "bytecode": "compiled (.pyc under the cache folder)" if BYTECODE["prefix"] else
            ("not written (PYTHONDONTWRITEBYTECODE)" if os.environ.get("PYTHONDONTWRITEBYTECODE") else "default"),
            "platform": platform.platform(),
            "loadavg_1min_before_after": [load_before, load_after],
        },
        "series": [s.as_dict() for s in series.values()],
        "ratios": {k: round(v, 2) for k, v in ratios.items()},
        "imports": imports,
    }
    print_table(results)
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(results, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
