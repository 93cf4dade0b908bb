#!/usr/bin/env python3
"""Generate ``ascend_env/torch_npu_matrix.json``: torch-npu releases, the torch each pins, the CANN versions
Ascend documents for it, from the snapshots in ``ascend_env/sources/`` (see ``sources/SOURCES.md``).

    python ascend_env/generate.py            # rewrite the table
    python ascend_env/generate.py --check    # exit 1 when the committed table is stale

Offline and byte-deterministic (sorted keys, no timestamps). Refresh a snapshot, rerun, commit both.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
SOURCES = HERE / "sources"
OUTPUT = HERE / "torch_npu_matrix.json"
GENERATOR_VERSION = 1

README_TABLE = "README-ascend-auxiliary-software.md"
RELEASE_NOTES = "related_product_version_compatibility_notes.md"
COMPATIBILITY = "version_compatibility.md"
PYPI_VERSIONS = "pypi-torch-npu-versions.txt"
_RELEASE = re.compile(r"^(\d+\.\d+\.\d+)")
_CANN = re.compile(r"\d+\.\d+\.(?:RC\d+|\d+)(?:\.\d+)?")


def _rows(text: str) -> list[list[str]]:
    """Markdown table rows as cells, header and separator rows skipped."""
    rows = []
    for line in text.splitlines():
        line = line.strip()
        if not line.startswith("|") or set(line) <= set("|-: "):
            continue
        rows.append([cell.strip() for cell in line.strip("|").split("|")])
    return rows


def _torch_pin(release: str) -> str:
    match = _RELEASE.match(release)
    if not match:
        raise ValueError(f"{release!r} is not a torch-npu release version")
    return match.group(1)


def build(sources: Path = SOURCES) -> dict:
    pypi = (sources / PYPI_VERSIONS).read_text(encoding="utf-8")
    versions_line = next(line for line in pypi.splitlines() if line.startswith("Available versions:"))
    releases = [v.strip() for v in versions_line.split(":", 1)[1].split(",") if v.strip()]

    cann: dict[str, set[str]] = {}  # torch-npu release -> CANN versions documented for it
    extension: dict[str, str] = {}  # torch-npu release -> "Ascend Extension for PyTorch" version (branch suffix)
    python: dict[str, list[str]] = {}
    current = ""
    for cells in _rows((sources / README_TABLE).read_text(encoding="utf-8"))[1:]:
        current = cells[0].removeprefix("CANN ").strip() or current
        release, branch = cells[2], cells[3]
        cann.setdefault(release, set()).add(current)
        extension[release] = branch.rpartition("-")[2]
    notes = (sources / RELEASE_NOTES).read_text(encoding="utf-8")
    table1 = notes.split("**表 2**")[0]
    for cells in _rows(table1)[1:]:
        release = cells[4]
        cann.setdefault(release, set()).update(_CANN.findall(cells[0]))
        extension[release] = cells[2]
        python[release] = sorted(set(re.findall(r"Python(3\.\d+)", cells[5])), key=lambda v: int(v.split(".")[1]))
    compatible: dict[str, set[str]] = {}
    for cells in _rows((sources / COMPATIBILITY).read_text(encoding="utf-8"))[1:]:
        compatible[cells[0]] = set(_CANN.findall(cells[1]))
    for release, ext in extension.items():
        cann.setdefault(release, set()).update(compatible.get(ext, ()))

    entries = []
    for release in releases:
        entry: dict = {"torch_npu": release, "torch": _torch_pin(release), "cann": sorted(cann.get(release, ()))}
        if release in extension:
            entry["extension"] = extension[release]
        if release in python:
            entry["python"] = python[release]
        entries.append(entry)
    digests = {name: hashlib.sha256((sources / name).read_bytes()).hexdigest()
               for name in (README_TABLE, RELEASE_NOTES, COMPATIBILITY, PYPI_VERSIONS)}
    return {
        "generator_version": GENERATOR_VERSION,
        "sources": digests,
        "source_notes": "ascend_env/sources/SOURCES.md (Ascend/pytorch documentation, CC BY 4.0; PyPI torch-npu)",
        "torch_pin_rule": "torch==<release part of the torch-npu version> (Requires-Dist of every torch-npu wheel)",
        "releases": entries,
    }


def render(table: dict) -> str:
    return json.dumps(table, indent=1, sort_keys=True, ensure_ascii=True) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 when the committed table is stale")
    args = parser.parse_args(argv)
    text = render(build())
    if args.check:
        if not OUTPUT.is_file() or OUTPUT.read_text(encoding="utf-8") != text:
            print(f"{OUTPUT} is stale: run python ascend_env/generate.py", file=sys.stderr)
            return 1
        return 0
    OUTPUT.write_text(text, encoding="utf-8")
    print(f"wrote {OUTPUT} ({len(json.loads(text)['releases'])} releases)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
