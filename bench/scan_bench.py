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
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from cli_timing import BYTECODE, REPO, Series, cli_env, run_cli, scan_args
from import_timing import bench_imports, plain_project
from scan_bench_report import loadavg, print_table
from sdists import BenchError, Pin, default_cache, fetch_tree

# The pinned input. The digest is the one PyPI publishes for this file (checked against
# https://pypi.org/simple/megatron-core/ when it was pinned); change all three together.
PACKAGE = "megatron-core"
VERSION = "0.12.1"
SDIST = "megatron_core-0.12.1.tar.gz"
SHA256 = "11c40a1a26713951eaae6f73d5944f921db427cedd0e29b891102685a96d662f"

# One ordinary module of that tree for the explicit-file (pre-commit) case.
ONE_FILE = "megatron/core/transformer/transformer_layer.py"

TARGETS = {"cold": 10.0, "warm": 1.0, "one_file": 0.5}


# -- input --------------------------------------------------------------------------------------
MEGATRON = Pin(PACKAGE, VERSION, SDIST, SHA256)


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


def _parser() -> argparse.ArgumentParser:
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
    return parser


@dataclass
class Measured:
    tree: Path
    files: int
    lines: int
    series: dict[str, Series]
    imports: list[dict]
    load_before_after: tuple[float | None, float | None]


def measure(args: argparse.Namespace, log) -> Measured:
    """Every timing of one benchmark run; BenchError when it cannot run."""
    cache = (args.cache or default_cache()).absolute()
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
        return Measured(tree, files, lines, series, imports, (load_before, loadavg()))
    finally:
        shutil.rmtree(work, ignore_errors=True)


def results_of(m: Measured, args: argparse.Namespace) -> dict:
    series = m.series
    ratios = {"CLI cold / CLI warm": series["cold"].median / series["warm"].median}
    ratios["CLI one file (--no-cache) / CLI one file (warm)"] = series["one_cold"].median / series["one_warm"].median
    if "api_cold" in series:
        ratios["api cold / api warm"] = series["api_cold"].median / series["api_warm"].median
        ratios["CLI cold / api cold (start-up + output overhead)"] = series["cold"].median / series["api_cold"].median
    bytecode = "compiled (.pyc under the cache folder)" if BYTECODE["prefix"] else (
        "not written (PYTHONDONTWRITEBYTECODE)" if os.environ.get("PYTHONDONTWRITEBYTECODE") else "default")
    return {
        "meta": {
            "package": PACKAGE,
            "version": VERSION,
            "sdist": SDIST,
            "sha256": SHA256,
            "tree": str(m.tree),
            "files": m.files,
            "lines": m.lines,
            "reps": args.reps,
            "jobs": args.jobs if args.jobs is not None else "default",
            "python": platform.python_version(),
            "cpus": os.cpu_count(),
            "bytecode": bytecode,
            "platform": platform.platform(),
            "loadavg_1min_before_after": list(m.load_before_after),
        },
        "series": [s.as_dict() for s in series.values()],
        "ratios": {k: round(v, 2) for k, v in ratios.items()},
        "imports": m.imports,
    }


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--_worker"]:
        return worker_main(*argv[1:])
    parser = _parser()
    args = parser.parse_args(argv)
    if args.reps < 1:
        parser.error("--reps must be at least 1")

    def log(message: str) -> None:
        if not args.quiet:
            print(message, file=sys.stderr, flush=True)

    try:
        measured = measure(args, log)
    except BenchError as exc:
        print(f"scan_bench: error: {exc}", file=sys.stderr)
        return 2
    results = results_of(measured, args)
    print_table(results)
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(results, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
