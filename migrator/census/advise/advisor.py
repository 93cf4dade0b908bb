"""Huawei's own profile advisor, where installed: `msprof-analyze advisor all -d DIR` (PyPI msprof-analyze).
Not reimplemented: its output is included as it printed it (the tail), and its report files stay in a
temporary folder that is removed after the run (the advisor writes them into its working folder)."""

from __future__ import annotations

import shutil
import subprocess
import tempfile

from .model import AdvisorRun

EXECUTABLE = "msprof-analyze"
TIMEOUT_S = 600
OUTPUT_TAIL = 6000


def run(profile_dir: str, timeout: float = TIMEOUT_S) -> AdvisorRun:
    path = shutil.which(EXECUTABLE)
    command = (EXECUTABLE, "advisor", "all", "-d", profile_dir)
    if path is None:
        return AdvisorRun(command, installed=False)
    with tempfile.TemporaryDirectory(prefix="migrate-advisor-") as work:
        try:
            proc = subprocess.run([path, *command[1:]], cwd=work, capture_output=True, text=True, errors="replace",
                                  timeout=timeout, stdin=subprocess.DEVNULL)
        except subprocess.TimeoutExpired as exc:
            out = (exc.stdout or "") if isinstance(exc.stdout, str) else ""
            return AdvisorRun(command, True, None, f"{out[-OUTPUT_TAIL:]}\n(stopped after {timeout:.0f} s)")
        except OSError as exc:
            return AdvisorRun(command, True, None, f"could not start: {exc}")
    text = (proc.stdout + ("\n" + proc.stderr if proc.stderr.strip() else "")).strip()
    return AdvisorRun(command, True, proc.returncode, text[-OUTPUT_TAIL:])
