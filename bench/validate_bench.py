"""Benchmark `migrate validate` (prints figures; never a test).

    python3 bench/validate_bench.py                # S0–S3 on samples/gpt (tiny) + S0 at 384 ranks
    python3 bench/validate_bench.py -n 3 --json /tmp/validate-bench.json

Targets (the issue): the whole S0–S3 on samples/gpt ≤ 90 s on a 2-core box; S0 at world size 384
≤ 5 s; memory ≤ 4 GB. Each measurement runs `python3 -m migrator validate ...` in a subprocess, as
a user would, including `migrate fix` into a temp dir (what `migrate validate ORIGINAL` does
without `--migrated`). Memory: the largest resident set of any process of the run (the CLI, a
harness child, a torchrun rank; Linux `RUSAGE_CHILDREN` maximum) and, as an upper bound of the
concurrent total, that figure times the processes that run at once (2 in S1 and in S2/S3, plus
torchrun's agent). Exit 0 when the measurements ran, 2 when they could not.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
TARGETS = {"full_s0_s3_seconds": 90.0, "s0_384_seconds": 5.0, "memory_gb": 4.0}


def run(args: list[str], out: Path) -> dict:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])),
               NO_COLOR="1")
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "migrator", "validate", *args, "-q", "-o", str(out)],
                          cwd=REPO, env=env, capture_output=True, text=True)
    seconds = time.perf_counter() - t0
    peak_kb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    if proc.returncode not in (0, 1):
        raise SystemExit(f"validate failed (exit {proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
    doc = json.loads(out.read_text())
    return {"seconds": seconds, "exit": proc.returncode, "max_rss_mb": max(peak_kb, before) / 1024,
            "stages": {s["id"]: (s["status"], (s.get("bench") or {}).get("seconds")) for s in doc["stages"]}}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("-n", "--reps", type=int, default=1)
    parser.add_argument("--sample", default="samples/gpt")
    parser.add_argument("--json", help="write the raw figures here")
    parser.add_argument("--no-moe", dest="moe", action="store_false", help="skip the samples/moe row")
    ns = parser.parse_args()
    tmp = Path(os.environ.get("TMPDIR", "/tmp")) / f"validate-bench-{os.getpid()}"
    tmp.mkdir(parents=True, exist_ok=True)
    full, plan, moe = [], [], []
    migrated = tmp / "migrated"
    subprocess.run([sys.executable, "-m", "migrator", "fix", ns.sample, "--root", ns.sample, "--target", "npu",
                    "--out", str(migrated), "-q", "--fail-on", "never"], cwd=REPO, check=True, capture_output=True,
                   env=dict(os.environ, PYTHONPATH=str(REPO)))
    for i in range(ns.reps):
        full.append(run([ns.sample], tmp / f"full{i}.json"))
        plan.append(run([ns.sample, "--migrated", str(migrated), "--stages", "S0", "--plan-world-size", "384"],
                        tmp / f"s0-{i}.json"))
        if ns.moe:
            moe.append(run(["samples/moe"], tmp / f"moe{i}.json"))
    f_sec = statistics.median(r["seconds"] for r in full)
    p_sec = statistics.median(r["seconds"] for r in plan)
    p_stage = statistics.median(r["stages"]["S0"][1] for r in plan)
    mem = max(r["max_rss_mb"] for r in full + plan + moe) / 1024
    concurrent = mem * 3  # two harness processes at once, plus torchrun's agent or the CLI
    rows = [
        ("whole S0–S3, " + ns.sample + " (CLI, incl. migrate fix)", f"{f_sec:.1f} s", f"≤ {TARGETS['full_s0_s3_seconds']:.0f} s",
         f_sec <= TARGETS["full_s0_s3_seconds"]),
        ("  per stage (S0 / S1 / S2 / S3)", " / ".join(
            f"{full[0]['stages'][s][0]} {full[0]['stages'][s][1] or 0:.1f}s" for s in ("S0", "S1", "S2", "S3")), "", True),
        ("S0 at world size 384 (the stage: child start, plan, fwd/bwd)", f"{p_stage:.2f} s",
         f"≤ {TARGETS['s0_384_seconds']:.0f} s", p_stage <= TARGETS["s0_384_seconds"]),
        ("S0 at world size 384 (CLI end to end, --migrated)", f"{p_sec:.1f} s", "", True),
        *([("whole S0–S3, samples/moe (TP + EP in S3)", f"{statistics.median(r['seconds'] for r in moe):.1f} s", "", True),
           ("  per stage (S0 / S1 / S2 / S3)", " / ".join(
               f"{moe[0]['stages'][s][0]} {moe[0]['stages'][s][1] or 0:.1f}s" for s in ("S0", "S1", "S2", "S3")), "", True)]
          if moe else []),
        ("largest process RSS", f"{mem:.2f} GB", f"≤ {TARGETS['memory_gb']:.0f} GB", mem <= TARGETS["memory_gb"]),
        ("upper bound of concurrent RSS (x3)", f"{concurrent:.2f} GB", f"≤ {TARGETS['memory_gb']:.0f} GB",
         concurrent <= TARGETS["memory_gb"]),
    ]
    width = max(len(r[0]) for r in rows)
    print(f"migrate validate benchmark ({os.cpu_count()} cores, {ns.reps} rep(s), medians)")
    for label, value, target, ok in rows:
        mark = "" if not target else ("  ok" if ok else "  MISSED")
        print(f"  {label:<{width}}  {value:>38}  {target:>8}{mark}")
    print(f"  exit codes: gpt {[r['exit'] for r in full]}, S0@384 {[r['exit'] for r in plan]}, moe {[r['exit'] for r in moe]}")
    if ns.json:
        Path(ns.json).write_text(json.dumps({"full": full, "plan384": plan, "moe": moe}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
