#!/usr/bin/env python3
"""Generate ``framework_routes/routes.json`` from ``routes.in.yaml`` and the shared MindSpeed patch tables.

    python framework_routes/generate.py            # writes routes.json
    python framework_routes/generate.py --check    # exit 1 if the committed file is stale

Inputs: ``routes.in.yaml`` (hand-curated facts, each with its source) and the MindSpeed
``register_patch`` tables under ``frameworks/mindspeed/`` of the shared data snapshot
(``--shared-data``, default ``../shared/data`` relative to the repository root), each pinned by
sha256 below. Only ``cuda-replacement`` rows that the torch_npu route can apply are kept
(``never:``, ``mindspore-only:`` and interpreter-version gates are dropped). Output is
byte-deterministic (sorted keys, ASCII, no timestamps).
"""

from __future__ import annotations

import argparse
import csv
import hashlib
import json
import re
import sys
from pathlib import Path

import yaml

HERE = Path(__file__).resolve().parent
REPO_ROOT = HERE.parent
FORMAT_VERSION = 1
OUTPUT = "routes.json"
PINNED_SHA256: dict[str, str] = {
    "frameworks/mindspeed/patches-2.1.0_core_r0.12.1.tsv": "58d9fbb3bcf4f5bc6145073971b91edbe72b322d2193ab28389d129744ee533d",
    "frameworks/mindspeed/patches-1.0.0_core_r0.6.0.tsv": "33d3217c10bf3d6829f1cc12fa094ee034c2f1834c844cb5e9ee9dbdc0f56cf9",
}
NOT_ON_TORCH_NPU = ("never", "mindspore-only", "sys.version_info")
PLACEHOLDERS = ("torch.nn.Module", "<dummy>")


class GenerationError(Exception):
    pass


def default_shared_data() -> Path:
    for candidate in (REPO_ROOT.parent / "shared" / "data", Path("/work/shared/data")):
        if (candidate / "SOURCES.md").is_file():
            return candidate
    return REPO_ROOT.parent / "shared" / "data"


def _flag_of(gate: str) -> str | None:
    """`args.transformer_impl == 'local'` -> `--transformer-impl local`; `args.use_flash_attn and ...` -> `--use-flash-attn`."""
    m = re.search(r"args\.(\w+)(?:\s*==\s*'([^']*)')?", gate)
    if not m:
        return None
    flag = "--" + m.group(1).replace("_", "-")
    return f"{flag} {m.group(2)}" if m.group(2) else flag


def patch_rows(tsv: Path, rel: str) -> list[dict]:
    rows = []
    with open(tsv, encoding="utf-8", newline="") as fh:
        for row in csv.DictReader(fh, delimiter="\t"):
            gate, category = row["gate"], row["category"]
            if category != "cuda-replacement" or gate.startswith(NOT_ON_TORCH_NPU):
                continue
            replacement = row["replacement"]
            placeholder = replacement.startswith(PLACEHOLDERS)
            if gate.startswith("args."):
                status, flag = "gated", _flag_of(gate)
            else:
                status, flag = "covered", None
            if placeholder:
                status = "left"
                note = (
                    "MindSpeed makes it importable only: a raising stub" if replacement.startswith("<dummy>")
                    else "MindSpeed replaces it with a bare torch.nn.Module placeholder (importable, not functional)"
                )
            else:
                note = f"replaced by {replacement}"
            entry = {
                "match": "exact", "target": row["target"], "status": status, "replacement": replacement,
                "at": row["file:line"], "gate": gate, "note": note, "source": f"{rel} ({row['file:line']})",
            }
            if flag:
                entry["flag"] = flag
            rows.append(entry)
    return rows


def build(shared: Path, spec_path: Path = HERE / "routes.in.yaml") -> dict:
    spec = yaml.safe_load(spec_path.read_text(encoding="utf-8"))
    inputs = {"routes.in.yaml": hashlib.sha256(spec_path.read_bytes()).hexdigest()}
    routes = []
    for route in spec["routes"]:
        route = dict(route)
        covers = [dict(e) for e in route.pop("extra", [])]
        table = route.get("patch_table")
        if table:
            path = shared / table
            if not path.is_file():
                raise GenerationError(f"{path}: patch table missing (is --shared-data right?)")
            digest = hashlib.sha256(path.read_bytes()).hexdigest()
            pinned = PINNED_SHA256.get(table)
            if pinned and digest != pinned:
                raise GenerationError(f"{path}: sha256 {digest} does not match the pinned {pinned}")
            inputs[table] = digest
            covers.extend(patch_rows(path, table))
        route["covers"] = covers
        routes.append(route)
    return {"format": FORMAT_VERSION, "inputs": inputs, "routes": routes, "notes": spec.get("notes", [])}


def dumps(data: dict) -> str:
    return json.dumps(data, indent=1, sort_keys=True, ensure_ascii=True) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shared-data", type=Path, default=None)
    parser.add_argument("--output-dir", type=Path, default=HERE)
    parser.add_argument("--check", action="store_true", help="exit 1 if the committed routes.json is stale")
    args = parser.parse_args(argv)
    try:
        text = dumps(build(args.shared_data or default_shared_data()))
    except (GenerationError, OSError, yaml.YAMLError, KeyError) as exc:
        print(f"generate: {exc}", file=sys.stderr)
        return 2
    target = args.output_dir / OUTPUT
    if args.check:
        if not target.is_file() or target.read_text(encoding="utf-8") != text:
            print(f"{target} is stale: run `python framework_routes/generate.py`", file=sys.stderr)
            return 1
        return 0
    args.output_dir.mkdir(parents=True, exist_ok=True)
    target.write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
