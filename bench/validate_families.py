"""Run every variant of the unseen program families (tests/validation/families: mamba, swin,
tensor_parallel) through `migrate validate` and print, per variant: expected, got, whether the named
cause holds the slip's expected phrases, the named cause and the time (never a test).

    PYTHONPATH=. python3 bench/validate_families.py                      # all families
    PYTHONPATH=. python3 bench/validate_families.py --family swin --variant hand_port --json out.json

Each family's original is recorded once (S1, step 0); every variant is compared against it on the
family's stages (S1; S1 and S3 on 2 ranks for tensor_parallel). Acceptance (issue 37 item 7): every
slip caught, the right cause for >= 90 %, no false alarm on the ports and refactors. Exit 0 when every
variant ran (whatever the verdicts), 2 when a family could not be recorded."""

from __future__ import annotations

import argparse
import importlib
import json
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
FAMILIES = ("mamba", "swin", "tensor_parallel")


def _load(name: str):
    if str(REPO) not in sys.path:
        sys.path.insert(0, str(REPO))
    return importlib.import_module(f"tests.validation.families.{name}").FAMILY


def _row(o) -> str:
    v = o.variant
    cause_ok = "-" if v.kind != "slip" else ("yes" if all(p in o.cause for p in v.cause) else "no")
    cause = (o.cause or "").replace("\n", " ")
    return (f"| {o.family} | {v.name} | {v.kind}{'/' + v.category if v.category else ''} | {v.expected} | {o.got} | "
            f"{cause_ok} | {o.seconds:.1f} | {cause[:300].replace('|', '/')} |")


def summary(outcomes: list) -> list[str]:
    slips = [o for o in outcomes if o.variant.kind == "slip"]
    correct = [o for o in outcomes if o.variant.kind != "slip"]
    caught = [o for o in slips if o.got == "fail"]
    right = [o for o in slips if o.right]
    alarms = [o for o in correct if o.got != "pass"]
    pct = 100.0 * len(right) / len(slips) if slips else 0.0
    return [f"slips caught: {len(caught)}/{len(slips)}; right cause named: {len(right)}/{len(slips)} ({pct:.0f} %); "
            f"false alarms on correct ports and refactors: {len(alarms)}/{len(correct)}"
            + (f" ({', '.join(o.family + '/' + o.variant.name for o in alarms)})" if alarms else ""),
            f"total time: {sum(o.seconds for o in outcomes):.0f} s over {len(outcomes)} variants"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--family", action="append", choices=FAMILIES, help="repeatable; default: all")
    parser.add_argument("--variant", action="append", help="only these variant names (repeatable)")
    parser.add_argument("--json", help="write the outcomes here")
    parser.add_argument("--keep", help="build the trees in this folder (kept) instead of a temporary one")
    args = parser.parse_args(argv)
    from tests.validation.families.harness import record, run_variant  # noqa: PLC0415  (after the path is set)

    _load(FAMILIES[0])
    root = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="validate-families-"))
    outcomes = []
    print("| family | variant | kind | expected | got | right cause | s | named cause |")
    print("|---|---|---|---|---|---|---|---|")
    for name in args.family or FAMILIES:
        family = _load(name)
        folder = root / name
        try:
            original, reference = record(family, folder)
        except AssertionError as exc:
            print(f"{name}: the original could not be recorded: {exc}", file=sys.stderr)
            return 2
        for variant in family.variants:
            if args.variant and variant.name not in args.variant:
                continue
            outcome = run_variant(family, variant, folder, original, reference)
            outcomes.append(outcome)
            print(_row(outcome), flush=True)
    print()
    for line in summary(outcomes):
        print(line)
    if args.json:
        Path(args.json).write_text(json.dumps([{"family": o.family, "variant": o.variant.name, "kind": o.variant.kind,
                                                "category": o.variant.category, "expected": o.variant.expected,
                                                "got": o.got, "stage": o.stage, "cause": o.cause,
                                                "right": o.right, "seconds": round(o.seconds, 2)} for o in outcomes],
                                              indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
