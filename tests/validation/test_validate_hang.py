"""An S2 rank that hangs: the stage stops at --timeout and no rank process outlives it (torchrun
starts every rank in a session of its own, so killing torchrun's group alone would orphan them)."""

from __future__ import annotations

import time

import pytest

pytest.importorskip("torch")
pytest.importorskip("safetensors")

from tests.conftest import survivors  # noqa: E402

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
    # the run's folders: a rank forked from a zygote names none on its command line, but works in the tree
    assert survivors(str(tmp_path)) == [], "a rank outlived the S2 timeout"
