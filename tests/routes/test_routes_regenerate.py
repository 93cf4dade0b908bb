"""framework_routes/routes.json is generated: regenerating it from the shared tables gives the same bytes."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
GENERATOR = REPO / "framework_routes" / "generate.py"


def _shared_data() -> Path | None:
    for candidate in (REPO.parent / "shared" / "data", Path("/work/shared/data")):
        if (candidate / "frameworks" / "mindspeed").is_dir():
            return candidate
    return None


def test_regenerated_routes_are_byte_identical(tmp_path):
    shared = _shared_data()
    if shared is None:
        pytest.skip("shared data snapshot not found (../shared/data relative to the repo root, /work/shared/data)")
    cmd = [sys.executable, str(GENERATOR), "--shared-data", str(shared), "--output-dir", str(tmp_path)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "routes.json").read_bytes() == (REPO / "framework_routes" / "routes.json").read_bytes(), (
        "framework_routes/routes.json is stale: run `python framework_routes/generate.py`"
    )
    check = subprocess.run([*cmd[:4], "--check"], capture_output=True, text=True, timeout=120)
    assert check.returncode == 0, check.stderr


def test_a_changed_patch_table_is_refused(tmp_path):
    shared = _shared_data()
    if shared is None:
        pytest.skip("shared data snapshot not found")
    fake = tmp_path / "shared" / "frameworks" / "mindspeed"
    fake.mkdir(parents=True)
    for tsv in (shared / "frameworks" / "mindspeed").glob("*.tsv"):
        (fake / tsv.name).write_bytes(tsv.read_bytes() + b"x\ty\tz\talways\tcuda-replacement\n")
    proc = subprocess.run([sys.executable, str(GENERATOR), "--shared-data", str(tmp_path / "shared"),
                           "--output-dir", str(tmp_path / "out")], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and "does not match the pinned" in proc.stderr
