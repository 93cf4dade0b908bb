#!/usr/bin/env python3
"""`migrate fix` on real repositories: pinned PyPI sdists, both targets, checked end to end.

    python3 bench/real_repos.py                       # every package, both targets, a table
    python3 bench/real_repos.py -p timm -p accelerate --target npu
    python3 bench/real_repos.py --json out.json       # also the full results (failure examples included)
    python3 bench/real_repos.py --corpus fresh        # issue 39's acceptance corpus (nine other repositories)

For each package and target, on its own fresh scratch copy of the unpacked sdist (the cache is
never edited): scan -> fix (in process, `migrator.api.fix`) -> re-parse every written .py ->
`python -m migrator fix --check` (a subprocess, as a user runs it) -> a second fix. It counts
files scanned, findings, fixes (edits), declined sites, internal fixer errors, other per-file
errors, written .py files that do not parse, CUDA-free files touched (files without any finding
that changed), non-idempotent files (what the second fix changed, the fix record included), and on each
changed .py file what a careful engineer keeps (`bench/fix_care.py`): comments lost, new unused imports,
rewritten availability checks that still guard a CUDA call (guard inversions).
See bench/README.md for the pinned inputs and the last results.

Exit status: 0 when every run was clean, 1 when a run found a problem, 2 when the inputs could not
be fetched.
"""

from __future__ import annotations

import argparse
import ast
import hashlib
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
import traceback
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import fix_care  # noqa: E402
from sdists import BenchError, Pin, fetch_tree  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
TOOL_FOLDER = ".migrate/"  # the record and the folder's own .gitignore: the tool's files, not the package's
TARGETS = ("npu", "portable")


@dataclass(frozen=True)
class Package:
    pin: Pin
    subset: tuple[str, ...] = ()  # paths inside the sdist to keep (a slice of a huge tree); () = all


# Digests as PyPI publishes them (https://pypi.org/simple/<name>/, PEP 691 JSON), pinned 2026-12-01.
PACKAGES: dict[str, Package] = {
    p.pin.name: p
    for p in (
        Package(Pin("timm", "1.0.15", "timm-1.0.15.tar.gz",
                    "756a3bc30c96565f056e608a9b559daed904617eaadb6be536f96874879b1055")),
        Package(Pin("flash-attn", "2.7.4.post1", "flash_attn-2.7.4.post1.tar.gz",
                    "f03485c9a49a4d68d0733acdcad80ab0e72afa025a777fdc2966ceccf9d51765")),
        Package(Pin("megatron-core", "0.12.1", "megatron_core-0.12.1.tar.gz",
                    "11c40a1a26713951eaae6f73d5944f921db427cedd0e29b891102685a96d662f")),
        Package(Pin("deepspeed", "0.16.4", "deepspeed-0.16.4.tar.gz",
                    "495febfb6dd20423f44b1c4a1bb6da2cadbcaf9b07962e17f87d52edfeec9bba")),
        Package(Pin("fairseq", "0.12.2", "fairseq-0.12.2.tar.gz",
                    "34f1b18426bf3844714534162f065ab733e049597476daa35fffb4d06a92b524")),
        Package(Pin("accelerate", "1.6.0", "accelerate-1.6.0.tar.gz",
                    "28c1ef1846e690944f98b68dc7b8bb6c51d032d45e85dcbb3adb0c8b99dffb32")),
        Package(Pin("diffusers", "0.32.2", "diffusers-0.32.2.tar.gz",
                    "eb1e36b326aabb0675729af7c626caf7a76ce7ced3a126e879331790b1eaa230")),
        Package(
            Pin("transformers", "4.51.3", "transformers-4.51.3.tar.gz",
                "e292fcab3990c6defe6328f0f7d2004283ca81a7a07b2de9a46d67fd81ea1409"),
            subset=(
                "src/transformers/trainer.py", "src/transformers/modeling_utils.py",
                "src/transformers/training_args.py", "src/transformers/integrations",
                "src/transformers/models/llama", "src/transformers/models/gpt2",
                "src/transformers/models/bert", "src/transformers/models/t5",
                "src/transformers/models/mixtral",
            ),
        ),
    )
}
SMALLEST = "accelerate"  # the network test's package

# Issue 39's acceptance corpus: nine repositories no earlier benchmark used (`--corpus fresh`; the recall of
# the same trees: `bench/scan_recall.py --corpus fresh`). Digests from https://pypi.org/pypi/<name>/json, 2026-12-09.
FRESH: dict[str, Package] = {
    p.pin.name: p
    for p in (
        Package(Pin("sentence-transformers", "6.3.0", "sentence_transformers-6.3.0.tar.gz",
                    "a19acbf76a958817136ee4e89f90b483255d77f3dc9a7309814f7600592c450e")),
        Package(Pin("torchmetrics", "1.9.0", "torchmetrics-1.9.0.tar.gz",
                    "a488609948600df52d3db4fcdab02e62aab2a85ef34da67037dc3e65b8512faa")),
        Package(Pin("kornia", "0.9.0", "kornia-0.9.0.tar.gz",
                    "65e82219b10e73289fb8cb3c739879d917e6908c0a977b1d65f388cba1741f71")),
        Package(Pin("speechbrain", "1.1.2", "speechbrain-1.1.2.tar.gz",
                    "a49328b61f6e6caa0e01ab4e32bc15b564114953e30718b1379d2e1d764e426a")),
        Package(Pin("fairscale", "0.4.13", "fairscale-0.4.13.tar.gz",
                    "1b797825c427f5dba92253fd0d8daa574e8bd651a2423497775fab1b30cfb768")),
        Package(Pin("litgpt", "0.5.13", "litgpt-0.5.13.tar.gz",
                    "77be78814d0334e8e32ee6dac417e9718ebad45529458995ca255af24cf15cf3")),
        Package(Pin("ultralytics", "8.4.190", "ultralytics-8.4.190.tar.gz",
                    "c7a0ebb21d10f1de98682b6a4dc22bc0d1d0634b9398c086bd03b1e5bf40cbc3")),
        Package(Pin("mmdet", "3.3.0", "mmdet-3.3.0.tar.gz",
                    "fe8cc2685d60a2a4f2530a4e92aa6269fe45af93265303a31bf4ea463eb3164f")),
        Package(Pin("monai", "1.6.1", "monai-1.6.1.tar.gz",
                    "e24ae4bb944f1779b7a6445acc4ff2efd9cc504d05dffe2498c49af117350136")),
    )
}
CORPORA = {"earlier": PACKAGES, "fresh": FRESH}


@dataclass
class RunReport:
    package: str
    version: str
    target: str
    files: int = 0
    findings: int = 0
    fixes: int = 0
    declined: int = 0
    changed: int = 0
    internal_errors: list[str] = field(default_factory=list)  # "path: message"
    file_errors: list[str] = field(default_factory=list)  # other per-file errors the fixer reported
    unparsable: list[str] = field(default_factory=list)  # written .py files that do not parse
    cuda_free_touched: list[str] = field(default_factory=list)  # changed files that had no finding
    runtime_modules: int = 0  # `_migrate_runtime.py` modules written (portable target)
    non_idempotent: list[str] = field(default_factory=list)  # changed again by the second fix
    comments_lost: list[str] = field(default_factory=list)  # bench/fix_care.py, on each changed .py file
    new_unused_imports: list[str] = field(default_factory=list)
    guard_inversions: list[str] = field(default_factory=list)
    check_exit: int | None = None
    check_output: str = ""
    crash: str | None = None  # an exception out of migrator.api itself
    seconds: float = 0.0  # the first fix, in process
    agreement: Any = None  # run_one(agreement=True): bench/fix_agreement.py's Agreement of the same scan and fix

    @property
    def clean(self) -> bool:
        return (self.crash is None and self.check_exit == 0 and not self.internal_errors and not self.unparsable
                and not self.cuda_free_touched and not self.non_idempotent and not self.comments_lost
                and not self.new_unused_imports and not self.guard_inversions)

    def as_dict(self) -> dict:
        fields = asdict(self)
        del fields["agreement"]  # the tests' check, not a column of the benchmark
        return {**fields, "clean": self.clean}


def _snapshot(root: Path) -> dict[str, str]:
    """relative POSIX path -> sha256 of every file under root."""
    out = {}
    for path in root.rglob("*"):
        if path.is_file():
            out[path.relative_to(root).as_posix()] = hashlib.sha256(path.read_bytes()).hexdigest()
    return out


def _changed(before: dict[str, str], after: dict[str, str]) -> list[str]:
    return sorted(p for p in set(before) | set(after) if before.get(p) != after.get(p))


def scratch_copy(tree: Path, subset: tuple[str, ...], dest: Path) -> Path:
    """A copy of `tree` (or of its `subset` paths) under `dest`, its own project root."""
    if not subset:
        shutil.copytree(tree, dest, ignore=shutil.ignore_patterns(".bench-unpacked"))
    else:
        for rel in subset:
            src = tree / rel
            if src.is_dir():
                shutil.copytree(src, dest / rel)
            elif src.is_file():
                (dest / rel).parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(src, dest / rel)
            else:
                raise BenchError(f"{rel} is not in {tree.name}")
    if not (dest / "pyproject.toml").is_file():  # the project root for scan and fix
        (dest / "pyproject.toml").write_text(f'[project]\nname = "{tree.name}"\nversion = "0"\n')
    return dest


def _parses(path: Path) -> bool:
    try:
        ast.parse(path.read_bytes(), filename=str(path))
    except (SyntaxError, ValueError):
        return False
    return True


def run_check(copy: Path, target: str) -> tuple[int, str]:
    env = {**os.environ, "NO_COLOR": "1", "CI": "1"}
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), *filter(None, [env.get("PYTHONPATH")])])
    cmd = [sys.executable, "-m", "migrator", "fix", "--check", "--target", target, "--no-cache", str(copy)]
    proc = subprocess.run(cmd, cwd=copy, env=env, capture_output=True, text=True)
    return proc.returncode, (proc.stdout + proc.stderr).strip()[-2000:]


def run_one(package: Package, target: str, tree: Path, work: Path, log=lambda message: None,
            agreement: bool = False) -> RunReport:
    """scan -> fix -> re-parse -> fix --check -> second fix on a fresh copy of `tree`. With `agreement` the
    scan is made for `target` and its fixable sites are checked against the fix's edits (bench/fix_agreement.py)
    on the same run: one scan and fix of the tree serve both checks."""
    from migrator import api

    pin = package.pin
    report = RunReport(pin.name, pin.version, target)
    copy = scratch_copy(tree, package.subset, work / f"{pin.tree_name}-{target}")
    try:
        scanned = api.scan([copy], use_cache=False, **({"target": target} if agreement else {}))
        report.files = scanned.summary.files_scanned
        report.findings = len(scanned.findings)
        with_findings = {f.path for f in scanned.findings}
        before = _snapshot(copy)
        start = time.perf_counter()
        outcome = api.fix([copy], target=target, use_cache=False)
        report.seconds = round(time.perf_counter() - start, 2)
        if agreement:
            from fix_agreement import agreement_of

            report.agreement = agreement_of(f"{pin.name}-{pin.version}", target, scanned, outcome)
        after = _snapshot(copy)
        for change in outcome.plan.changes:
            if change.changed:
                report.fixes += len(change.edits)
            report.declined += len(change.declined)
            if change.error:
                bucket = report.internal_errors if "internal fixer error" in change.error else report.file_errors
                bucket.append(f"{change.path}: {change.error}")
        written = [p for p in _changed(before, after) if not p.startswith(TOOL_FOLDER)]
        report.changed = len(written)
        report.unparsable = [p for p in written if p.endswith(".py") and not _parses(copy / p)]
        # the portable target's `_migrate_runtime.py` modules are new files the fix writes on purpose
        runtime_modules = {c.real_path for c in outcome.plan.changes if c.runtime_module and c.changed}
        report.runtime_modules = len(runtime_modules)
        report.cuda_free_touched = [p for p in written if p not in with_findings and p not in runtime_modules]
        _check_care(report, [c for c in outcome.plan.changes if c.changed and c.path.endswith(".py")])
        log(f"  {pin.name} {target}: fixed {report.changed} files in {report.seconds} s; fix --check ...")
        report.check_exit, report.check_output = run_check(copy, target)
        api.fix([copy], target=target, use_cache=False)
        report.non_idempotent = _changed(after, _snapshot(copy))
    except Exception:  # noqa: BLE001 - a crash is a result here, not the end of the benchmark
        report.crash = traceback.format_exc(limit=6)[-3000:]
    return report


def _check_care(report: RunReport, changes: list) -> None:
    """Comments kept, no new unused import, no availability check rewritten over a CUDA call it guards."""
    for c in changes:
        report.comments_lost += fix_care.comments_lost(c.path, c.before, c.after)
        checks = [e.new_line for e in c.edits if e.symbol == fix_care.AVAILABILITY and e.new_line]
        report.guard_inversions += fix_care.guard_inversions(c.path, c.after, checks)
    report.new_unused_imports = fix_care.new_unused_imports([(c.path, c.before, c.after) for c in changes])


# -- report -------------------------------------------------------------------------------------
COLUMNS = ("package", "target", "files", "findings", "fixes", "declined", "internal", "unparsable",
           "cuda-free touched", "non-idempotent", "comments lost", "new unused imports", "guard inversions",
           "check exit", "fix s")


def row_of(r: RunReport) -> list[str]:
    check = "crash" if r.crash else str(r.check_exit)
    return [f"{r.package} {r.version}", r.target, str(r.files), str(r.findings), str(r.fixes), str(r.declined),
            str(len(r.internal_errors)), str(len(r.unparsable)), str(len(r.cuda_free_touched)),
            str(len(r.non_idempotent)), str(len(r.comments_lost)), str(len(r.new_unused_imports)),
            str(len(r.guard_inversions)), check, f"{r.seconds:.1f}"]


def markdown_table(reports: list[RunReport]) -> str:
    lines = ["| " + " | ".join(COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
    lines += ["| " + " | ".join(row_of(r)) + " |" for r in reports]
    return "\n".join(lines) + "\n"


def problems(reports: list[RunReport]) -> str:
    out = []
    for r in reports:
        label = f"{r.package} {r.target}"
        if r.crash:
            out.append(f"{label}: CRASH\n    " + r.crash.strip().replace("\n", "\n    "))
        for kind, items in (("internal error", r.internal_errors), ("other file error", r.file_errors),
                            ("unparsable", r.unparsable), ("CUDA-free file touched", r.cuda_free_touched),
                            ("non-idempotent", r.non_idempotent), ("comment lost", r.comments_lost),
                            ("new unused import", r.new_unused_imports), ("guard inversion", r.guard_inversions)):
            for item in items:
                out.append(f"{label}: {kind}: {item}")
        if r.check_exit not in (0, None):
            out.append(f"{label}: fix --check exit {r.check_exit}: {r.check_output.splitlines()[-1:]}")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", choices=sorted(CORPORA), default="earlier",
                        help="which pinned set (default: earlier; fresh: issue 39's acceptance corpus)")
    parser.add_argument("-p", "--package", action="append", choices=sorted({*PACKAGES, *FRESH}),
                        help="run only this package of the corpus (repeatable; default: all)")
    parser.add_argument("--target", choices=TARGETS, action="append", help="only this target (default: both)")
    parser.add_argument("--cache", type=Path, help="download/unpack folder (default $MIGRATE_BENCH_CACHE or "
                        "~/.cache/ascend-migrate-bench)")
    parser.add_argument("--json", type=Path, help="also write every result (failure details included) as JSON")
    parser.add_argument("--markdown", action="store_true", help="print the table as Markdown")
    parser.add_argument("--quiet", "-q", action="store_true", help="no progress lines")
    args = parser.parse_args(argv)
    sys.path.insert(0, str(REPO))

    def log(message: str) -> None:
        if not args.quiet:
            print(message, file=sys.stderr, flush=True)

    packages = CORPORA[args.corpus]
    names = args.package or list(packages)
    unknown = [n for n in names if n not in packages]
    if unknown:
        parser.error(f"not in the {args.corpus} corpus: {', '.join(unknown)}")
    targets = args.target or list(TARGETS)
    try:
        trees = {name: fetch_tree(packages[name].pin, args.cache, log) for name in names}
    except BenchError as exc:
        print(f"real_repos: error: {exc}", file=sys.stderr)
        return 2
    meta = {"python": platform.python_version(), "cpus": os.cpu_count(), "platform": platform.platform(),
            "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}
    reports: list[RunReport] = []
    with tempfile.TemporaryDirectory(prefix="real-repos-") as tmp:
        for name in names:
            for target in targets:
                log(f"{name} {packages[name].pin.version}, target {target} ...")
                report = run_one(packages[name], target, trees[name], Path(tmp), log)
                reports.append(report)
                log("  " + " | ".join(row_of(report)) + ("\n  " + problems([report]).replace("\n", "\n  ")
                                                          if not report.clean else ""))
                if args.json:  # after every run: a long corpus run that is stopped keeps what it did
                    args.json.write_text(json.dumps({"meta": meta, "runs": [r.as_dict() for r in reports]}, indent=2) + "\n")
    w = sys.stdout.write
    if args.markdown:
        w(markdown_table(reports))
    else:
        widths = [max(len(c), *(len(row_of(r)[i]) for r in reports)) for i, c in enumerate(COLUMNS)]
        w("  ".join(c.rjust(widths[i]) for i, c in enumerate(COLUMNS)) + "\n")
        for r in reports:
            w("  ".join(v.rjust(widths[i]) for i, v in enumerate(row_of(r))) + "\n")
    found = problems(reports)
    if found:
        w("\nproblems\n" + found + "\n")
    return 0 if all(r.clean for r in reports) else 1


if __name__ == "__main__":
    sys.exit(main())
