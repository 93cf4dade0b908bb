#!/usr/bin/env python3
"""What the perf lint adds to an op census (issue 42 item 3): target <= 10 % of the census run.

    python3 bench/perf_lint_overhead.py            # samples/gpt (protocol) and the acceptance fixture, 3 rounds
    python3 bench/perf_lint_overhead.py -n 5 --steps 4

For each program the census child runs `--steps` training steps with the per-step shape recording on
and off (`TraceOptions.step_shapes`), alternating, `-n` rounds each; the child's own traced seconds are
compared (start-up and torch import left out: they do not depend on the lint). The parent's lint
(`census.perf_lint.lint` over the child's rows) is timed on the rows of each run with recording on.
Prints per program: median traced seconds off / on, median lint seconds, and the overhead
`(on - off + lint) / off`. Reported, never asserted. Exit status 0 when it ran, 2 when it could not.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

PROGRAMS = {"samples/gpt (protocol)": (REPO / "samples" / "gpt", None),
            "perf acceptance (script)": (REPO / "tests" / "fixtures" / "perf" / "acceptance", "train.py")}


def _child(tree: Path, script: str | None, steps: int, step_shapes: bool) -> tuple[float, list]:
    """(the child's traced seconds, its rows) for one census run."""
    from migrator.census import CensusError, TraceOptions, _job, _single_rank_env
    from migrator.census.records import CensusStatus
    from migrator.validation.parent import launcher

    work = tempfile.mkdtemp(prefix="perf-lint-bench-")
    try:
        target = tree / script if script else tree
        opts = TraceOptions(target=str(target), root=str(tree), steps=steps, step_shapes=step_shapes)
        job = _job(opts, str(Path(work) / "census"))
        env = launcher.child_env(0, 1, _single_rank_env() if script else None)
        result = launcher.wait(launcher.start(job, "census", env, 600, module="migrator.census.child"), CensusStatus)
        if not result.statuses or not result.status.ok:
            raise CensusError(f"{target}: the census failed: {result.log_tail[-400:]}")
        return result.status.seconds, [dict(r) for r in result.status.rows]
    finally:
        shutil.rmtree(work, ignore_errors=True)


def measure(name: str, source: Path, script: str | None, steps: int, rounds: int) -> float:
    from migrator.census import aicpu_rules
    from migrator.census.perf_lint import lint

    tree = Path(tempfile.mkdtemp(prefix="perf-lint-tree-")) / source.name
    shutil.copytree(source, tree, ignore=shutil.ignore_patterns("__pycache__", ".migrate"))
    off, on, linted, sites = [], [], [], 0
    for round_ in range(rounds):  # the order alternates: a first run pays for cold caches
        if round_ % 2 == 0:
            off.append(_child(tree, script, steps, False)[0])
        seconds, rows = _child(tree, script, steps, True)
        on.append(seconds)
        if round_ % 2 == 1:
            off.append(_child(tree, script, steps, False)[0])
        aicpu_rules.load.cache_clear()  # the rule file's parse counts, the package import (trace's own) not
        t0 = time.perf_counter()
        sites = len(lint(rows, steps, None).sites)
        linted.append(time.perf_counter() - t0)
    base, traced, lint_s = statistics.median(off), statistics.median(on), statistics.median(linted)
    overhead = (traced - base + lint_s) / base
    print(f"{name}: {steps} steps, {rounds} rounds; census traced {base:.3f} s without the per-step shapes, "
          f"{traced:.3f} s with them; lint {lint_s * 1000:.1f} ms ({sites} sites); "
          f"overhead {overhead * 100:+.1f} % of the census run (target <= 10 %)")
    shutil.rmtree(tree.parent, ignore_errors=True)
    return overhead


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", "--rounds", type=int, default=3)
    parser.add_argument("--steps", type=int, default=3)
    args = parser.parse_args(argv)
    try:
        for name, (tree, script) in PROGRAMS.items():
            measure(name, tree, script, args.steps, args.rounds)
    except Exception as exc:  # noqa: BLE001 - a benchmark reports why it could not run
        print(f"could not run: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
