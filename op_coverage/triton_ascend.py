"""Generate `op_coverage/triton-ascend.json`: what Triton-Ascend runs, from its pinned docs.

    python op_coverage/triton_ascend.py [--shared-data DIR] [--check]

Reads the copies in `<shared-data>/triton-ascend/` (MIT, Ascend/triton-ascend @ COMMIT): the
op × dtype table and constraints (`python-api/outline.md`), the UB size (`programming_guide.md`)
and the core-dimension limit (`migration_guide/migrate_from_gpu.md`). Facts only; every row keeps
its source file and line so a test can tie it back. Output is byte-deterministic.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
OUT = REPO_ROOT / "op_coverage" / "triton-ascend.json"
COMMIT = "eeb030e7bb71f8a251c5d378dbe2977e8b8dbb83"
OUTLINE = "triton-ascend/python-api/outline.md"
GUIDE = "triton-ascend/programming_guide.md"
MIGRATE = "triton-ascend/migration_guide/migrate_from_gpu.md"
CELL = {"✓": "yes", "✓*": "bool-as-int8", "×": "no"}
# Hints the table marks × but Ascend's own tutorials call: the compiler drops them.
IGNORED_HINTS = ("max_constancy", "max_contiguous", "multiple_of")
CONSTRAINT = re.compile(r"^- (?P<ops>[\w/ 类]+?):\s*(?P<text>.+)$")


def _op_name(cell: str) -> tuple[str, str | None]:
    """`floordiv(//)` -> ("floordiv", "//"); `logical and` -> ("logical_and", None)."""
    m = re.fullmatch(r"(\w[\w ]*?)\((.+)\)", cell)
    name, operator = (m.group(1), m.group(2).replace("\\|", "|")) if m else (cell, None)
    return name.strip().replace(" ", "_"), operator


def parse_outline(text: str) -> tuple[list[str], list[dict], list[dict]]:
    dtypes: list[str] = []
    rows: list[dict] = []
    constraints: list[dict] = []
    category = ""
    for lineno, line in enumerate(text.splitlines(), 1):
        if line.startswith("|") and "Triton Op" in line:
            dtypes = [c.strip() for c in line.strip("|").split("|")[2:]]
            continue
        cells = [c.strip() for c in re.split(r"(?<!\\)\|", line.strip())[1:-1]]
        if dtypes and len(cells) == len(dtypes) + 2 and cells[2] in CELL:
            category = cells[0] or category
            op, operator = _op_name(cells[1])
            support = {d: CELL[c] for d, c in zip(dtypes, cells[2:])}
            status = "ignored" if op in IGNORED_HINTS else (
                "unsupported" if all(v == "no" for v in support.values()) else "supported")
            rows.append({"op": op, "operator": operator, "category": category, "status": status,
                         "dtypes": support, "source": {"file": OUTLINE, "line": lineno}})
            continue
        m = CONSTRAINT.match(line)
        if m and dtypes:
            ops = sorted({o.strip() for o in m.group("ops").split("/")})
            constraints.append({"ops": ops, "source": {"file": OUTLINE, "line": lineno}})
    return dtypes, rows, constraints


def _find(text: str, pattern: str, file: str) -> tuple[re.Match, dict]:
    for lineno, line in enumerate(text.splitlines(), 1):
        if m := re.search(pattern, line):
            return m, {"file": file, "line": lineno}
    raise SystemExit(f"{file}: no line matches {pattern!r} (docs changed?)")


def build(shared: Path) -> dict:
    dtypes, rows, constraints = parse_outline((shared / OUTLINE).read_text(encoding="utf-8"))
    ub, ub_src = _find((shared / GUIDE).read_text(encoding="utf-8"), r"UB size of the A2 .* is (\d+) KB", GUIDE)
    db, db_src = _find((shared / OUTLINE).read_text(encoding="utf-8"), r"不能超过(\d+)KB，若关闭double buffer", OUTLINE)
    core, core_src = _find((shared / MIGRATE).read_text(encoding="utf-8"), r"cannot exceed \*\*UINT16_MAX\*\* \(\*\*(\d+)\*\*\)",
                           MIGRATE)
    return {
        "source": {"repository": "Ascend/triton-ascend", "commit": COMMIT, "licence": "MIT",
                   "package": "triton-ascend==3.2.0", "generator": "op_coverage/triton_ascend.py"},
        "dtypes": dtypes,
        "ops": rows,
        "constraints": constraints,
        "limits": {
            "ub_bytes": {"value": int(ub.group(1)) * 1024, "source": ub_src},
            "ub_bytes_double_buffer": {"value": int(db.group(1)) * 1024, "source": db_src},
            "core_dim_max": {"value": int(core.group(1)), "source": core_src},
        },
    }


def render(table: dict) -> str:
    return json.dumps(table, indent=1, sort_keys=True, ensure_ascii=True) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shared-data", type=Path, default=REPO_ROOT.parent / "shared" / "data")
    parser.add_argument("--check", action="store_true", help="exit 1 when the committed table is stale")
    args = parser.parse_args(argv)
    text = render(build(args.shared_data))
    if args.check:
        return 0 if OUT.read_text(encoding="utf-8") == text else 1
    OUT.write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
