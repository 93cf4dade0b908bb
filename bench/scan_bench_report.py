"""The scan benchmark's printed table (medians, rates, targets, ratios, import times, notes)."""

from __future__ import annotations

import os
import sys


def loadavg() -> float | None:
    try:
        return round(os.getloadavg()[0], 2)
    except OSError:
        return None


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
