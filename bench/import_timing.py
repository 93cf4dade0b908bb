"""Import time of the light commands (`python3 -X importtime`): they must not import libcst or torch."""

from __future__ import annotations

import statistics
import tempfile
from pathlib import Path

from cli_timing import run_cli

HEAVY_MODULES = ("libcst", "torch")
# A file with nothing for the scanner to find (no accelerator names at all).
PLAIN_SOURCE = '"""A plain module."""\n\n\ndef add(a, b):\n    return a + b\n'


def plain_project(cache: Path) -> Path:
    """A one-file project (its own pyproject.toml, so it is its own scan root) with no markers."""
    folder = cache / "plain"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "pyproject.toml").write_text('[project]\nname = "plain"\nversion = "0"\n')
    path = folder / "plain.py"
    path.write_text(PLAIN_SOURCE)
    return path


def parse_importtime(stderr: str) -> tuple[float, list[str], list[tuple[str, float]]]:
    """(total seconds = sum of `self`, imported module names, top-level modules by cumulative)."""
    total_us = 0
    names: list[str] = []
    top: list[tuple[str, float]] = []
    for line in stderr.splitlines():
        if not line.startswith("import time:") or "self [us]" in line:
            continue
        try:
            _, rest = line.split(":", 1)
            self_us, cum_us, name = (part for part in rest.split("|", 2))
            total_us += int(self_us)
        except ValueError:
            continue
        stripped = name.strip()
        names.append(stripped)
        if name.startswith(" ") and not name.startswith("  "):  # one space: a top-level import
            top.append((stripped, int(cum_us) / 1e6))
    top.sort(key=lambda item: -item[1])
    return total_us / 1e6, names, top[:5]


def bench_imports(plain: Path, reps: int, work: Path) -> list[dict]:
    cases = [
        ("--help", ["--help"]),
        ("rules", ["rules"]),
        ("rule DEV001", ["rule", "DEV001"]),
        ("scan <file without markers>", ["scan", str(plain), "--no-cache"]),
    ]
    rows = []
    for label, args in cases:
        cache_dir = Path(tempfile.mkdtemp(dir=work, prefix="imp-"))
        _, proc = run_cli(args, cache_dir, ("-X", "importtime"))
        total, names, top = parse_importtime(proc.stderr)
        heavy = sorted({n.split(".", 1)[0] for n in names if n.split(".", 1)[0] in HEAVY_MODULES})
        walls = [run_cli(args, cache_dir)[0] for _ in range(reps)]
        rows.append(
            {
                "command": "python3 -m migrator " + " ".join(a if a != str(plain) else "plain.py" for a in args),
                "label": label,
                "import_total_s": round(total, 4),
                "modules_imported": len(names),
                "heavy_imported": heavy,
                "top_cumulative": [(n, round(s, 4)) for n, s in top],
                "wall_median_s": round(statistics.median(walls), 4),
            }
        )
    return rows
