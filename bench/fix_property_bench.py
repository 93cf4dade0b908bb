"""Run the `migrate fix` properties of tests/fix/test_fix_property.py on thousands of generated
programs and print counts (prints figures; never a test).

    python3 bench/fix_property_bench.py                    # 2000 examples, hypothesmith bodies
    python3 bench/fix_property_bench.py -n 5000 --shapes-only --seed 1

Each example: a program of syntax shapes (tests/fix/programs.py), CUDA snippets and (unless
--shapes-only) a hypothesmith-generated module, fixed for a random target, then fixed again.
Properties: no error and no exception, the output parses, files without edits stay identical,
the second fix changes nothing. Exit 0 when every example held, 1 on the first counterexample
(hypothesis prints it, shrunk), 2 when hypothesis/hypothesmith are missing.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
import warnings
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", "--examples", type=int, default=2000)
    parser.add_argument("--shapes-only", action="store_true", help="no hypothesmith bodies (faster)")
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--progress", type=int, default=250, metavar="N", help="a summary line every N programs (0: none)")
    args = parser.parse_args(argv)
    sys.path.insert(0, str(REPO))
    warnings.filterwarnings("ignore", category=SyntaxWarning)  # hypothesmith's odd-but-valid programs
    try:
        from hypothesis import HealthCheck, assume, given, seed, settings

        from tests.fix.programs import check_fix_properties, program_strategy, valid_python
    except ImportError as exc:
        print(f"needs the test extra: {exc}", file=sys.stderr)
        return 2

    counts: Counter = Counter()
    t0 = time.perf_counter()

    @settings(max_examples=args.examples, deadline=None, database=None,
              suppress_health_check=list(HealthCheck))
    @given(case=program_strategy(generated_bodies=not args.shapes_only))
    def run(case):
        text, target = case
        counts["generated"] += 1
        if not valid_python(text):
            counts["rejected (does not parse)"] += 1
        assume(valid_python(text))
        work = Path(tempfile.mkdtemp())
        try:
            counts.update(check_fix_properties(work, text, target))
            counts[f"checked ({target})"] += 1
            if args.progress and (counts["checked (npu)"] + counts["checked (portable)"]) % args.progress == 0:
                print(_summary(counts, time.perf_counter() - t0), flush=True)
        finally:
            shutil.rmtree(work, ignore_errors=True)

    if args.seed is not None:
        run = seed(args.seed)(run)
    status = 0
    try:
        run()
    except AssertionError as exc:
        print(f"COUNTEREXAMPLE: {exc}", file=sys.stderr)
        status = 1
    print(_summary(counts, time.perf_counter() - t0))
    for key, value in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])):
        if key not in ("generated",):
            print(f"{value:8d}  {key}")
    return status


def _summary(counts: Counter, seconds: float) -> str:
    checked = counts["checked (npu)"] + counts["checked (portable)"]
    return (f"{checked} programs checked in {seconds:.1f} s ({checked / max(seconds, 1e-9):.1f}/s); "
            f"{counts['generated']} generated, {counts['rejected (does not parse)']} rejected; "
            f"{counts['applied']} sites applied, {counts['declined']} declined")


if __name__ == "__main__":
    sys.exit(main())
