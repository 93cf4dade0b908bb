"""Timing the `migrate` command line in subprocesses: the series of runs and the environment they get
(their own cache folder, compiled bytecode outside the repository, no colour or progress bar)."""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from sdists import BenchError

REPO = Path(__file__).resolve().parent.parent


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


BYTECODE: dict[str, str | None] = {"prefix": None}  # set by scan_bench.main(): where .pyc files go


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
