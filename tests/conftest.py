from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(autouse=True)
def _isolated_cache(tmp_path_factory, monkeypatch):
    """Each test session scans with its own cache folder, never the user's."""
    monkeypatch.setenv("MIGRATE_CACHE_DIR", str(tmp_path_factory.getbasetemp() / "scan-cache"))


def run_cli(*args: str, cwd: Path | None = None, env: dict | None = None, input: str | None = None):
    """Run `python -m migrator ...` in a subprocess, as a user would."""
    import subprocess

    full_env = {**os.environ, **(env or {})}
    # the checkout's package wins, whether or not it is installed
    full_env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), full_env.get("PYTHONPATH")]))
    full_env.pop("FORCE_COLOR", None)
    return subprocess.run(
        [sys.executable, "-m", "migrator", *args],
        cwd=cwd or REPO,
        env=full_env,
        capture_output=True,
        text=True,
        input=input,
        timeout=300,
    )
