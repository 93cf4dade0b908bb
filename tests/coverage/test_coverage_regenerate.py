"""Regenerate the table from the real inputs and compare it byte for byte with the committed one.

Needs: the shared data snapshot (``../shared/data`` relative to the repository root, or
/work/shared/data), torch 2.13.0 installed (its native_functions.yaml is pinned by sha256), and
the pinned torch-npu wheel in ``~/.cache/ascend-migrate/wheels`` (downloaded with pip when the
package registry is reachable). Skipped with the reason otherwise.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path

import pytest

from op_coverage import facts, real_inputs


def _shared_data(repo_root: Path) -> Path | None:
    for candidate in (repo_root.parent / "shared" / "data", Path("/work/shared/data")):
        if (candidate / "SOURCES.md").is_file():
            return candidate
    return None


@pytest.mark.slow
def test_regenerated_table_is_byte_identical(cov, tmp_path):
    shared = _shared_data(cov.REPO_ROOT)
    if shared is None:
        pytest.skip("shared data snapshot not found (../shared/data relative to the repo root, /work/shared/data)")

    for rel, pinned in facts.TORCH_PINNED_SHA256.items():
        try:
            path = real_inputs.find_torch_file(rel)
        except facts.GenerationError as exc:
            pytest.skip(f"torch {facts.TORCH_VERSION} not installed: {exc}")
        digest = hashlib.sha256(path.read_bytes()).hexdigest()
        if digest != pinned:
            pytest.skip(f"installed torch is not the pinned {facts.TORCH_VERSION} build ({rel} sha256 {digest[:12]}...)")

    cache = Path(os.environ.get("ASCEND_MIGRATE_WHEEL_CACHE", facts.DEFAULT_WHEEL_CACHE))
    try:
        real_inputs.ensure_wheel(None, cache, offline=False)
    except facts.GenerationError as exc:
        if "does not match the pinned" in str(exc):
            raise  # a wheel with the wrong content is a failure, not a reason to skip
        pytest.skip(f"torch-npu {facts.TORCH_NPU_VERSION} wheel not cached and the package registry is unreachable: {exc}")

    out = tmp_path / "out"
    cmd = [
        sys.executable, str(cov.GENERATOR), "--offline", "--wheel-cache", str(cache),
        "--shared-data", str(shared), "--output-dir", str(out),
    ]
    result = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr
    regenerated = (out / cov.TABLE.name).read_bytes()
    committed = cov.TABLE.read_bytes()
    assert regenerated == committed, "op_coverage table is stale: run `python op_coverage/generate.py`"

    check = subprocess.run(
        [sys.executable, str(cov.GENERATOR), "--offline", "--wheel-cache", str(cache),
         "--shared-data", str(shared), "--check"],
        capture_output=True, text=True, timeout=600,
    )
    assert check.returncode == 0, check.stderr
