"""An S2 rank that hangs: the stage stops at --timeout and no rank process outlives it (torchrun
starts every rank in a session of its own, so killing torchrun's group alone would orphan them)."""

from __future__ import annotations

import os
import time

import pytest

pytest.importorskip("torch")
pytest.importorskip("safetensors")

PROTOCOL = '''
import os, time, torch

class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.a = torch.nn.Linear(8, 8, bias=False)

    def forward(self, x):
        if int(os.environ.get("RANK", "0")) == 1:
            time.sleep(3600)  # rank 1 hangs in its forward
        return self.a(x)

def make_model(dropout=0.0):
    torch.manual_seed(0)
    return Net()

def make_batch(step):
    return {"x": torch.randn(4, 8, generator=torch.Generator().manual_seed(step))}

def loss_fn(out, batch):
    return out.float().pow(2).mean()
'''


def _survivors(marker: str, grace: float = 5.0) -> list[str]:
    if not os.path.isdir("/proc"):
        pytest.skip("needs /proc to list processes")
    deadline = time.monotonic() + grace
    while True:
        found = []
        for pid in filter(str.isdigit, os.listdir("/proc")):
            try:
                with open(f"/proc/{pid}/cmdline", "rb") as fh:
                    cmd = fh.read().replace(b"\0", b" ").decode("utf-8", "replace")
            except OSError:
                continue
            if marker in cmd:
                found.append(f"{pid}: {cmd}")
        if not found or time.monotonic() > deadline:
            return found
        time.sleep(0.2)


@pytest.mark.slow
def test_s2_hang_times_out_and_leaves_no_rank_running(tmp_path):
    from migrator import api

    tree = tmp_path / "tree"
    tree.mkdir()
    (tree / "validate.py").write_text(PROTOCOL)
    work = tmp_path / "work"
    t0 = time.monotonic()
    result = api.validate(tree, migrated=str(tree), stages=("S2",), timeout=20.0, work_dir=str(work))
    assert time.monotonic() - t0 < 90
    s2 = result.stage("S2")
    assert s2.status in ("fail", "error"), result.text()
    assert "timed out" in (s2.reason or "") or "timeout" in (s2.reason or "").lower(), s2.reason
    assert _survivors(str(work)) == [], "a rank outlived the S2 timeout"
