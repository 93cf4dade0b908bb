"""`migrate plan --measure NAME`: measure this machine and write `[tool.migrate.clusters.NAME]`.

The child (`measure_child.py`, the only place torch is imported) runs in the project's process scope and
prints its timings as JSON; here they become figures flagged `measured` (the best GEMM rate per dtype as the
peak, the copy as the memory bandwidth, the all-reduce bus bandwidth as the in-domain bandwidth) and are
written into ROOT/pyproject.toml through `safe_write`, tomlkit keeping every other byte of the file.
"""

from __future__ import annotations

import datetime
import json
import sys
from pathlib import Path
from typing import Any

from .clusters import ClusterError


def run_child(cwd: Path, timeout: float = 600) -> dict[str, Any]:
    import os

    from migrator.validation.parent.launcher import package_root

    from .probe import _run_scoped

    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [package_root(), os.environ.get("PYTHONPATH")])))
    proc = _run_scoped([sys.executable, "-m", "migrator.plan.measure_child"], env, str(cwd), timeout)
    if proc is None:
        raise ClusterError(f"--measure: the measurement took over {timeout:.0f} s")
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    if proc.returncode or not lines:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-3:]
        raise ClusterError("--measure: the measuring process failed: " + (" | ".join(tail) or f"exit {proc.returncode}"))
    doc: dict[str, Any] = json.loads(lines[-1])
    if "error" in doc:
        raise ClusterError(f"--measure: {doc['error']}")
    return doc


def _fig(value: float, source: str) -> dict[str, Any]:
    return {"value": float(f"{value:.4g}"), "flag": "measured", "source": source}  # 4 digits: a CPU's 0.002 stays > 0


def _series(values: dict[str, float], unit: str) -> str:
    return ", ".join(f"{k} {v:.4g} {unit}" for k, v in values.items())


def profile(doc: dict[str, Any], today: str | None = None) -> dict[str, Any]:
    """The `[tool.migrate.clusters.NAME]` table for a measurement (figures flagged measured)."""
    date = today or datetime.date.today().isoformat()
    where = f"migrate plan --measure on {doc['device']}, {date}"
    world = int(doc["world"])
    out: dict[str, Any] = {"title": f"{doc['device']} (measured {date})", "device": doc["device"], "date": date,
                           "versions": dict(doc["versions"]), "backend": doc["backend"]}
    for dtype, rates in doc["gemm_tflops"].items():
        out[f"peak_tflops_{dtype}"] = _fig(max(rates.values()), f"{where}: best square GEMM of {_series(rates, 'TFLOP/s')}")
    out["hbm_GBps"] = _fig(doc["copy_GBps"], f"{where}: copy (read + write) bandwidth")
    out["hbm_GB"] = _fig(doc["memory_bytes"] / 1e9, f"{where}: memory per device"
                         + (f" (host memory / {world} processes)" if doc["kind"] == "cpu" else ""))
    for key in ("devices", "devices_per_node", "domain_size"):
        out[key] = _fig(world, f"{where}: {world} local devices measured together ({doc['backend']})")
    bus = doc["bus_GBps"]
    if "all_reduce" in bus:
        every = "; ".join(f"{op} {_series(v, 'GB/s')}" for op, v in bus.items())
        out["domain_GBps"] = _fig(list(bus["all_reduce"].values())[-1],
                                  f"{where}: all-reduce bus bandwidth at the largest size ({doc['backend']}; {every})")
    return out


def write_profile(root: Path, name: str, table: dict[str, Any], merge: bool = False) -> Path:
    """Set `[tool.migrate.clusters.NAME]` in ROOT/pyproject.toml (created if absent), the rest unchanged;
    `merge` keeps the table's other keys (`plan --calibrate`). A dict value is an inline table, or a
    sub-table when it holds a list (one line per item)."""
    import tomlkit

    from migrator.ground import safe_write

    path = root / "pyproject.toml"
    text = path.read_text(encoding="utf-8") if path.exists() else ""
    doc = tomlkit.parse(text)
    node: Any = doc
    for key in ("tool", "migrate", "clusters"):
        if key not in node:
            node[key] = tomlkit.table(is_super_table=True)
        node = node[key]
        if not isinstance(node, dict):
            raise ClusterError(f"{path}: [{key}] must be a table")
    entry = node.get(name) if merge else None
    if entry is None:
        entry = node[name] = tomlkit.table()
    elif not isinstance(entry, dict):
        raise ClusterError(f"{path}: [tool.migrate.clusters.{name}] must be a table")
    for key in table:  # replaced keys go, so a sub-table is written after the figures
        entry.pop(key, None)
    for key, value in table.items():
        entry[key] = _toml_value(value) if isinstance(value, dict) else value
    safe_write.write_text(path, tomlkit.dumps(doc), root=root)
    return path


def _toml_value(value: dict[str, Any]) -> Any:
    import tomlkit

    if not any(isinstance(v, list) for v in value.values()):
        inline = tomlkit.inline_table()
        inline.update(value)
        return inline
    sub = tomlkit.table()
    for key, item in value.items():
        if isinstance(item, list):
            lines = tomlkit.array()
            lines.extend(item)
            item = lines.multiline(True)
        sub[key] = item
    return sub


def measure(root: Path, name: str) -> tuple[Path, list[str]]:
    """Measure, write the profile; returns the file and one line per figure (then what was measured on)."""
    table = profile(run_child(root))
    path = write_profile(root, name, table)
    lines = [f"{k} = {v['value']:g} ({v['flag']})" for k, v in table.items() if isinstance(v, dict) and "flag" in v]
    versions = ", ".join(f"{k} {v}" for k, v in table["versions"].items())
    return path, [*lines, f"measured on {table['device']} ({versions}; {table['backend']}), {table['date']}"]
