#!/usr/bin/env python3
"""How many CUDA-dependent lines `migrate scan` reports, against an independent token oracle.

    python3 bench/scan_recall.py                        # every pinned package, a table and the missed lines
    python3 bench/scan_recall.py -p peft -p trl --misses 50
    PYTHONPATH=/other/checkout python3 bench/scan_recall.py --code /other/checkout   # another version's scanner
    python3 bench/scan_recall.py --json out.json        # every missed line, for classification
    python3 bench/scan_recall.py --corpus fresh         # issue 39's acceptance corpus (bench/real_repos.py FRESH)

The oracle (`bench/recall_oracle.py`) marks lines by their tokens and knows nothing of the scanner. A marked
line counts as found when a finding's lines hold it, or, for a line of an import statement, when any finding
lies in that statement. Recall = found / (marked lines - lines a person judged no CUDA use: `NOT_CUDA` below,
each with its reason). Files the scan skipped (with its reason) are left out of both. The packages are pinned
PyPI sdists not used by the other benchmarks (`bench/sdists.py`: digest checked, cache outside the repo).

Exit status 0 when the measurement ran, 2 when an input could not be fetched or the scan failed.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from real_repos import FRESH  # noqa: E402
from recall_oracle import NAMES, scan_text  # noqa: E402
from sdists import BenchError, Pin, fetch_tree  # noqa: E402

REPO = Path(__file__).resolve().parent.parent

# Digests as PyPI publishes them (https://pypi.org/pypi/<name>/json, the sdist's sha256), pinned 2026-12-08.
PINS: dict[str, Pin] = {
    p.name: p
    for p in (
        Pin("peft", "0.21.2", "peft-0.21.2.tar.gz", "b803ccfb3f3f316004d850284306687833a2235ea278fb56abc856203456142e"),
        Pin("trl", "1.16.0", "trl-1.16.0.tar.gz", "999bd4a85b08870b7bfa387e1efa5177d2a4b88fe82b2526a057ac5d3cc600cd"),
        Pin("lightning", "2.6.6", "lightning-2.6.6.tar.gz",
            "1c6329e241f8a85f29fedead89c1ee138b36caa08de60c260c6a7eaee81c8295"),
        Pin("open-clip-torch", "3.3.0", "open_clip_torch-3.3.0.tar.gz",
            "904b1a9f909df8281bb3de60ab95491cd2994a509177ea4f9d6292a84fe24d6d"),
        Pin("mmengine", "0.10.7", "mmengine-0.10.7.tar.gz",
            "d20ffcc31127567e53dceff132612a87f0081de06cbb7ab2bdb7439125a69225"),
        Pin("xformers", "0.0.35", "xformers-0.0.35.tar.gz",
            "f7fc183a58e4bf0e2ae339a18fb1b1d4a37854c0f2545b4f360fef001646ab76"),
        Pin("colossalai", "0.5.0", "colossalai-0.5.0.tar.gz",
            "883913dfd1165937f444f2673752475efdc63506c4bc3d00af33c7c8fac6d39d"),
        Pin("mosaicml", "0.32.1", "mosaicml-0.32.1.tar.gz",
            "417c8aa574e22d39368a434eec0800268b275cb1cc2c8af8bc187475da4953d3"),
        Pin("nanotron", "0.4", "nanotron-0.4.tar.gz", "7ea378eb1b6b16c93a3021fcfd71dd73bd14d826126eae215e2b02e05cd6a120"),
    )
}

# `--corpus fresh`: issue 39's acceptance corpus, pinned with bench/real_repos.py (which runs `fix` on it)
CORPORA: dict[str, dict[str, Pin]] = {"recall": PINS, "fresh": {name: p.pin for name, p in FRESH.items()}}

# Marked lines a person read and judged no CUDA use: (regex over the line's text, why). Kept short and
# general; every entry names what it excuses.
NOT_CUDA: tuple[tuple[re.Pattern[str], str], ...] = tuple((re.compile(pattern), why) for pattern, why in (
    (r"^(async\s+)?def cuda\(", "defines a method named cuda (a tensor-like class, a tracer); its callers are the uses"),
    (r"register\(torch\.Tensor\.cuda\)", "registers a meta/tracing stand-in for the method: a table key, no call"),
    (r"[\"']npu[\"']", "the line lists npu beside cuda (`in (\"cuda\", \"npu\")`): the code already handles Ascend"),
    (r"\b(dict|OrderedDict)\(.*\bcuda=", "a dict key spelled as a keyword (`dict(cuda=..., cpu=...)`)"),
    (r"(?<![.\w])is_cuda\b", "a local flag named is_cuda; the check that set it is its own line"),
    (r"_attn_implementation == [\"']flash_attention_2|[\"']flash_attention_2[\"']\s*:",
     "reads which attention the config chose / maps that name to a class: the FlashAttention calls are reported"),
    (r"\bLiteral\[", "a type annotation naming backends"),
    (r"\bpytest\.mark\.\w+", "a pytest marker name"),
    (r"endswith\(\(['\"]cuda", "names of RNG-state entries in a checkpoint"),
    (r"\btriton\.(cdiv|next_power_of_2|Config|testing|__version__|runtime)\b",
     "triton host utilities run under triton-ascend (the same `triton` module): KERN004 is the import and each kernel"),
    # added with issue 39's fresh corpus (bench/README.md, Session 11), each read on the lines it excuses:
    (r"^(?!.*(\.cuda\b|\bcuda\s*[.(]|[\"'/]cuda|import|nvml|cupy))(?:.*[\s(\[,])?cuda(?![\w.(/=\"'])",
     "a local flag or parameter named cuda (`if cuda:`, `cuda: bool = False`): like is_cuda, the check that set it "
     "is its own line"),
    (r"\btorch\._inductor\.config\.triton\.", "inductor's options for its generated Triton code: a torch setting on "
     "every backend (torch_npu's inductor reads the same config), no CUDA call"),
    (r"^from\s+\.", "a relative import: the token is in the path of the tree's own module (ultralytics' `.triton` "
     "is its Triton Inference Server client), reported in that module"),
))

SKIPPED_PARTS = {"__pycache__", ".git", ".eggs", ".venv", "site-packages", "node_modules"}


@dataclass
class PackageRecall:
    name: str
    files: int = 0  # .py files read by the oracle (the scan's skips left out)
    marked: int = 0  # lines the oracle marked
    not_cuda: int = 0  # marked lines judged no CUDA use (NOT_CUDA)
    found: int = 0
    skipped_files: int = 0
    missed: list[dict] = field(default_factory=list)  # {path, line, token, text}

    @property
    def counted(self) -> int:
        return self.marked - self.not_cuda

    @property
    def recall(self) -> float:
        return self.found / self.counted if self.counted else 1.0


def run_scan(tree: Path, code: Path) -> dict:
    """`migrate scan` of the tree as a user runs it (a subprocess), its JSON result; `code` is the checkout."""
    with tempfile.TemporaryDirectory() as scratch:
        out = Path(scratch) / "scan.json"
        env = {**os.environ, "PYTHONPATH": str(code), "NO_COLOR": "1", "CI": "1",
               "MIGRATE_CACHE_DIR": str(Path(scratch) / "cache")}
        proc = subprocess.run(
            [sys.executable, "-m", "migrator", "scan", str(tree), "--format", "json", "-o", str(out), "--no-cache",
             "--exit-zero"], cwd=scratch, env=env, capture_output=True, text=True)
        if proc.returncode != 0 or not out.is_file():
            raise BenchError(f"scan of {tree} failed (exit {proc.returncode}): {proc.stderr[-2000:]}")
        return json.loads(out.read_text())


def _spans(result: dict) -> dict[str, list[tuple[int, int]]]:
    spans: dict[str, list[tuple[int, int]]] = {}
    for f in result["findings"]:
        spans.setdefault(f["path"], []).append((f["line"], f.get("end_line") or f["line"]))
    return spans


def measure(name: str, tree: Path, result: dict) -> PackageRecall:
    out = PackageRecall(name)
    skipped = {s["path"] for s in result.get("skipped", [])}
    spans = _spans(result)
    own = first_party(tree)
    for path in sorted(tree.rglob("*.py")):
        rel = path.relative_to(tree).as_posix()
        if SKIPPED_PARTS & set(path.relative_to(tree).parts) or not path.is_file():
            continue
        if rel in skipped:
            out.skipped_files += 1
            continue
        text = path.read_text(encoding="utf-8", errors="replace")
        oracle = scan_text(text)
        out.files += 1
        source_lines = text.splitlines()
        here = spans.get(rel, [])
        for line, token in sorted(oracle.lines.items()):
            out.marked += 1
            line_text = source_lines[line - 1].strip() if line <= len(source_lines) else ""
            if any(pattern.search(line_text) for pattern, _ in NOT_CUDA) or first_party_path(line_text, own):
                out.not_cuda += 1
                continue
            statement = next((s for s in oracle.statements if s.first <= line <= s.last), None)
            if any(first <= line <= last for first, last in here) or (
                    statement is not None and statement.is_import
                    and any(first <= statement.last and last >= statement.first for first, last in here)):
                out.found += 1
            else:
                out.missed.append({"path": rel, "line": line, "token": token, "text": line_text[:160]})
    return out


FROM_IMPORT = re.compile(r"^from\s+([\w.]+)\s+import\s+(.*)$")


def first_party(tree: Path) -> set[str]:
    """Top-level packages of the tree itself (at its root or under src/)."""
    return {p.parent.name for base in (tree, tree / "src") for p in base.glob("*/__init__.py")} | {"tests"}


def first_party_path(line: str, own: set[str]) -> bool:
    """`from colossalai.kernel.triton import rms_layernorm`: the token is in the path of the tree's own module,
    whose CUDA code is reported in that module; the imported names hold none of the oracle's names."""
    m = FROM_IMPORT.match(line)
    return bool(m and m.group(1).split(".")[0] in own and not (set(re.findall(r"\w+", m.group(2))) & NAMES))


def table(results: list[PackageRecall]) -> str:
    rows = ["| package | files | marked lines | judged not CUDA | counted | found | recall |",
            "|---|---|---|---|---|---|---|"]
    total = PackageRecall("all")
    for r in results:
        rows.append(f"| {r.name} | {r.files} | {r.marked} | {r.not_cuda} | {r.counted} | {r.found} | {r.recall:.2%} |")
        total.files += r.files
        total.marked += r.marked
        total.not_cuda += r.not_cuda
        total.found += r.found
    rows.append(f"| **all** | {total.files} | {total.marked} | {total.not_cuda} | {total.counted} | {total.found} | "
                f"**{total.recall:.2%}** |")
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", choices=sorted(CORPORA), default="recall",
                        help="which pinned set (default: recall, the nine above; fresh: issue 39's acceptance corpus)")
    parser.add_argument("-p", "--package", action="append", choices=sorted({n for c in CORPORA.values() for n in c}),
                        help="only these of the corpus (repeatable)")
    parser.add_argument("--code", type=Path, default=REPO, help="the checkout whose scanner runs (default: this one)")
    parser.add_argument("--misses", type=int, default=20, help="missed lines listed per package (default 20)")
    parser.add_argument("--json", type=Path, help="write every figure and every missed line here")
    parser.add_argument("--cache", type=Path, help="sdist cache (default $MIGRATE_BENCH_CACHE or ~/.cache/...)")
    args = parser.parse_args(argv)
    pins = CORPORA[args.corpus]
    results = []
    try:
        for name in args.package or sorted(pins):
            if name not in pins:
                parser.error(f"{name} is not in the {args.corpus} corpus")
            tree = fetch_tree(pins[name], args.cache, log=lambda m: print(m, file=sys.stderr))
            results.append(measure(f"{name} {pins[name].version}", tree, run_scan(tree, args.code.resolve())))
    except BenchError as exc:
        print(f"scan_recall: {exc}", file=sys.stderr)
        return 2
    print(table(results))
    for r in results:
        if r.missed:
            print(f"\n{r.name}: {len(r.missed)} missed (first {min(args.misses, len(r.missed))})")
            for m in r.missed[: args.misses]:
                print(f"  {m['path']}:{m['line']}  [{m['token']}]  {m['text']}")
    if args.json:
        args.json.write_text(json.dumps([{**vars(r), "recall": r.recall} for r in results], indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
