"""The original side hands its bf16-rounded weights to the migrated side through the shared folder
(child side): a ``weights.ready`` marker when written, ``original.failed`` when the original failed."""

from __future__ import annotations

import os
import time

READY = "weights.ready"
FAILED = "original.failed"


def _wait_for(shared: str, timeout: float) -> str:
    """Wait for the original side's weights; returns 'ready', 'failed' or 'timeout'."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if os.path.exists(os.path.join(shared, READY)):
            return "ready"
        if os.path.exists(os.path.join(shared, FAILED)):
            return "failed"
        time.sleep(0.05)
    return "timeout"


def _mark_failed(side: str, shared: str) -> None:
    if side == "original":
        os.makedirs(shared, exist_ok=True)
        with open(os.path.join(shared, FAILED), "w") as fh:
            fh.write("failed")
