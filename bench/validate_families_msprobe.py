"""The unseen program families (the variants of `bench/validate_families.py`) through real msprobe dumps:
each tree is run for one training step under msprobe's own `PrecisionDebugger` (`bench/msprobe_family_dump.py`,
PyPI mindstudio-probe, on CPU), the original on our CUDA references, the ports on the torch_npu emulation,
and each variant's dump is judged against the original's by `migrate validate --msprobe-target/--msprobe-golden`
(`interop/msprobe_compare.compare_dumps`). Never a test: it prints a table per task and level.

    PYTHONPATH=. python3 bench/validate_families_msprobe.py                     # all families
    PYTHONPATH=. python3 bench/validate_families_msprobe.py --family swin --level L1 --json out.json
    PYTHONPATH=. python3 bench/validate_families_msprobe.py --reuse DIR          # re-grade kept dumps
    PYTHONPATH=. python3 bench/validate_families_msprobe.py --steps 2 --real-levels --level L0   # L0 over 2 steps

Real dumps: tasks `statistics` and `tensor` at level `mix` (L0 module records plus L1 API records). The
L0 and L1 rows grade the mix dump's `Module.*` records and its API records apart (`--levels-from-mix`,
the default: one dump per task instead of three); `--real-levels` dumps L0 and L1 themselves.
tensor_parallel runs on 2 gloo ranks through its `parallelize` (its S3), the others on one process.

Graded as `validate_families.py` grades: a slip is caught when the comparison fails (exit 1), its cause
is right when every expected phrase of the variant is in the named cause (the first divergence's key, user
line, worst slot and argument diffs; `MSPROBE_CAUSE` where msprobe's words differ from our traces'), and a
correct port or refactor is a false alarm when it fails (a warning for records only one side has, such as a
fused op, or for what level L0 cannot see, is no alarm)."""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "bench"))
from validate_families import FAMILIES, _load  # noqa: E402  (the shared variant table)

TASKS = ("statistics", "tensor")
LEVELS = ("mix", "L0", "L1")
WORLD = {"tensor_parallel": 2}
# The phrases where msprobe's dumps must name a cause in other words than our traces' (the family's `cause`),
# each as strict: bench/README.md "Session 13: msprobe causes and L0 (issue 37)" says why, per row.
MSPROBE_CAUSE = {
    # the dumps run the parallelized model (its S3), so the residual projections are RowParallelLinear: both named
    ("tensor_parallel", "scaled_init_ignored"): ("out_proj (RowParallelLinear).weight",
                                                 "down_proj (RowParallelLinear).weight"),
    # msprobe records the column-parallel linear's backward (its input's gradient), with the original's
    # all_reduce there that the port no longer calls; our traces name the next module upstream
    ("tensor_parallel", "column_grad_not_reduced"): ("ColumnParallelLinear", "backward", "all_reduce"),
}


@dataclass(frozen=True)
class Graded:
    family: str
    variant: object               # harness.Variant
    task: str
    level: str
    got: str                      # pass / warn / fail / error
    cause: str
    unmatched: int
    seconds: float

    @property
    def caught(self) -> bool:
        return self.got == "fail"

    @property
    def right(self) -> bool:
        v = self.variant
        phrases = MSPROBE_CAUSE.get((self.family, v.name), v.cause)  # type: ignore[attr-defined]
        return self.caught and all(p in without_folders(self.cause) for p in phrases)


def without_folders(cause: str) -> str:
    """The cause without the folders of the paths in it: each tree's folder is named after its variant
    (`.../adam_eps_default/validate.py` holds "eps", `.../shift_mask_inverted/` "mask"), no word of the tool."""
    return re.sub(r"(?:/[^/\s,]+)+/", "", cause)


def _dump(side: str, tree: Path, out: Path, task: str, level: str, world: int, steps: int = 1) -> tuple[str, float]:
    """Run one dump child; returns ("", seconds) or (the error's tail, seconds)."""
    t0 = time.monotonic()
    shutil.rmtree(out, ignore_errors=True)
    done = subprocess.run([sys.executable, str(REPO / "bench" / "msprobe_family_dump.py"), side, str(tree),
                           str(out), task, level, str(world), str(steps)], capture_output=True, text=True, timeout=900,
                          env={**__import__("os").environ, "PYTHONPATH": str(REPO)})
    error = "" if done.returncode == 0 and out.is_dir() else (done.stderr or done.stdout)[-600:]
    return error, time.monotonic() - t0


def _level_view(dump: Path, level: str, dest: Path) -> Path:
    """The mix dump's records of one level (L0: `Module.*`, L1: the rest) as a dump folder of its own."""
    if level == "mix":
        return dump
    shutil.rmtree(dest, ignore_errors=True)
    for dump_json in dump.rglob("dump.json"):
        doc = json.loads(dump_json.read_text(encoding="utf-8"))
        keep = {k: v for k, v in doc["data"].items() if k.startswith("Module.") == (level == "L0")}
        folder = dest / dump_json.parent.relative_to(dump)
        folder.mkdir(parents=True)
        data_dir = dump_json.parent / "dump_tensor_data"
        doc.update(data=keep, level=level, dump_data_dir=str(data_dir) if data_dir.is_dir() else doc.get("dump_data_dir"))
        if data_dir.is_dir():
            (folder / "dump_tensor_data").symlink_to(data_dir)
        (folder / "dump.json").write_text(json.dumps(doc), encoding="utf-8")
        for name in ("stack.json", "construct.json"):
            if (dump_json.parent / name).is_file():
                shutil.copy(dump_json.parent / name, folder / name)
    return dest


def named_cause(comparison) -> str:
    first = comparison.first_divergence
    if first is None:
        return ""
    worst = first.worst
    parts = [f"{first.key} ({first.label})" + (f" in {first.scope}" if first.scope else "")]
    if worst is not None:
        parts.append(f"{worst.slot} {worst.metric} {worst.value:.3g} > {worst.threshold:.3g}"
                     + (f" ({worst.detail})" if worst.detail else ""))
    parts += list(first.argument_diffs)
    parts += [f"{slot} is {parameter}" for slot, parameter in first.parameters]
    if comparison.one_sided_before:
        parts.append("after target-only " + ", ".join(comparison.one_sided_before))
    if comparison.lost_collectives:
        parts.append("where the original called " + ", ".join(comparison.lost_collectives))
    if comparison.unrecorded:
        parts.append(comparison.unrecorded)
    if comparison.built_differently:
        parts.append("parameters that differ as built: " + ", ".join(comparison.built_differently))
    parts += list(comparison.in_source)
    if first.user_line:
        parts.append(f"at {first.user_line}")
    return "; ".join(parts)


def grade(family: str, variant, task: str, level: str, target: Path, golden: Path, seconds: float,
          scratch: Path) -> Graded:
    from migrator.validation.parent.interop.msprobe_compare import compare_dumps
    from migrator.validation.parent.interop.msprobe_dumps import MsprobeDumpError

    try:
        result = compare_dumps(str(_level_view(target, level, scratch / "t")),
                               str(_level_view(golden, level, scratch / "g")))
    except MsprobeDumpError as exc:
        return Graded(family, variant, task, level, "error", str(exc), 0, seconds)
    return Graded(family, variant, task, level, result.status.value, named_cause(result), len(result.unmatched),
                  seconds)


def _row(g: Graded) -> str:
    v = g.variant
    right = "-" if v.kind != "slip" else ("yes" if g.right else "no")  # type: ignore[attr-defined]
    return (f"| {g.family} | {v.name} | {v.kind}{'/' + v.category if v.category else ''} | "  # type: ignore[attr-defined]
            f"{v.expected} | {g.got} | {right} | {g.unmatched} | {g.cause[:260].replace('|', '/')} |")  # type: ignore[attr-defined]


def summary(graded: list[Graded]) -> str:
    slips = [g for g in graded if g.variant.kind == "slip"]  # type: ignore[attr-defined]
    correct = [g for g in graded if g.variant.kind != "slip"]  # type: ignore[attr-defined]
    alarms = [g for g in correct if g.got in ("fail", "error")]
    warns = [g for g in correct if g.got == "warn"]
    right = sum(g.right for g in slips)
    pct = 100.0 * right / len(slips) if slips else 0.0
    return (f"caught {sum(g.caught for g in slips)}/{len(slips)}; right cause {right}/{len(slips)} ({pct:.0f} %); "
            f"false alarms {len(alarms)}/{len(correct)}"
            + (f" ({', '.join(g.family + '/' + g.variant.name for g in alarms)})" if alarms else "")  # type: ignore[attr-defined]
            + f"; warnings (one-sided records) {len(warns)}/{len(correct)}")


def _trees(names: list[str], variants: list[str] | None, root: Path):
    from tests.validation.families.harness import write_original, write_variant

    for name in names:
        family = _load(name)
        original = root / name / "original"
        if not original.is_dir():
            write_original(family, original)
        for variant in family.variants:
            if variants and variant.name not in variants:
                continue
            tree = root / name / variant.name
            if not tree.is_dir():
                write_variant(family, variant, tree, original)
            yield family, variant, original, tree


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--family", action="append", choices=FAMILIES, help="repeatable; default: all")
    parser.add_argument("--variant", action="append", help="only these variant names (repeatable)")
    parser.add_argument("--task", action="append", choices=TASKS, help="repeatable; default: both")
    parser.add_argument("--level", action="append", choices=LEVELS, help="repeatable; default: all")
    parser.add_argument("--real-levels", action="store_true", help="dump L0 and L1 themselves, not from mix")
    parser.add_argument("--steps", type=int, default=1, help="training steps per dump (2: msprobe's step [0, 1], "
                        "so step 1's module records show what step 0's optimizer did; folders end in -steps2)")
    parser.add_argument("--jobs", type=int, default=2, help="dump children at once (default 2)")
    parser.add_argument("--keep", help="build trees and dumps here (kept) instead of a temporary folder")
    parser.add_argument("--reuse", help="grade the dumps already under this folder (a former --keep)")
    parser.add_argument("--json", help="write the graded rows here")
    args = parser.parse_args(argv)
    root = Path(args.reuse or args.keep or tempfile.mkdtemp(prefix="families-msprobe-"))
    tasks, levels = args.task or list(TASKS), args.level or list(LEVELS)
    dump_levels = levels if args.real_levels else ["mix"]
    trees = list(_trees(args.family or list(FAMILIES), args.variant, root))
    jobs: dict[tuple[str, str, str, str], tuple[str, Path, Path, int]] = {}
    suffix = f"-steps{args.steps}" if args.steps > 1 else ""
    for family, variant, original, tree in trees:
        for task in tasks:
            for level in dump_levels:
                world = WORLD.get(family.name, 1)
                dumps = root / "dumps" / family.name
                jobs[(family.name, "original", task, level)] = ("original", original, dumps / f"original-{task}-{level}{suffix}", world)
                jobs[(family.name, variant.name, task, level)] = ("migrated", tree, dumps / f"{variant.name}-{task}-{level}{suffix}", world)
    seconds: dict[tuple[str, str, str, str], float] = {}
    if not args.reuse:
        with ThreadPoolExecutor(max(1, args.jobs)) as pool:
            futures = {key: pool.submit(_dump, side, tree, out, key[2], key[3], world, args.steps)
                       for key, (side, tree, out, world) in jobs.items()}
            for key, future in futures.items():
                error, seconds[key] = future.result()
                if error:
                    print(f"{'/'.join(key)}: the dump failed: {error}", file=sys.stderr)
    graded: list[Graded] = []
    scratch = root / "views"
    for task in tasks:
        for level in levels:
            dump_level = level if args.real_levels else "mix"
            print(f"\n#### task {task}, level {level}" + ("" if dump_level == level else " (from the mix dump)"))
            print("\n| family | variant | kind | expected | got | right cause | one-sided | named cause |")
            print("|---|---|---|---|---|---|---|---|")
            rows = []
            for family, variant, _, _ in trees:
                golden = jobs[(family.name, "original", task, dump_level)][2]
                target = jobs[(family.name, variant.name, task, dump_level)][2]
                took = seconds.get((family.name, variant.name, task, dump_level), 0.0)
                g = grade(family.name, variant, task, level, target, golden, took, scratch) if target.is_dir() else \
                    Graded(family.name, variant, task, level, "error", "no dump", 0, took)
                rows.append(g)
                print(_row(g), flush=True)
            print(f"\n{task} {level}: {summary(rows)}")
            graded += rows
    print(f"\ndump time: {sum(seconds.values()):.0f} s over {len(seconds)} children ({args.jobs} at once); "
          f"trees and dumps under {root}")
    if args.json:
        Path(args.json).write_text(json.dumps([{"family": g.family, "variant": g.variant.name, "task": g.task,  # type: ignore[attr-defined]
                                                "level": g.level, "kind": g.variant.kind, "got": g.got,  # type: ignore[attr-defined]
                                                "right": g.right, "cause": g.cause, "unmatched": g.unmatched}
                                               for g in graded], indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
