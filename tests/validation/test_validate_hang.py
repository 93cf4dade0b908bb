"""An S2 rank that hangs: the stage stops at --timeout and no rank process outlives it (torchrun
starts every rank in a session of its own, so killing torchrun's group alone would orphan them).

The timeout is short: the zygote the ranks fork from has imported torch before the run starts, and the
hanging rank leaves a mark, so the test knows the timeout struck a rank in its forward, not a slow start."""

from __future__ import annotations

import time

import pytest

pytest.importorskip("torch")
pytest.importorskip("safetensors")

from tests.conftest import survivors, warm_zygote  # noqa: E402

PROTOCOL = '''
import os, time, torch

class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.a = torch.nn.Linear(8, 8, bias=False)

    def forward(self, x):
        if int(os.environ.get("RANK", "0")) == 1:
            open(HANG_MARK, "w").close()
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


# seconds: ranks forked off a warm zygote reached their forward in ~2 s on 2 cores at load 12
TIMEOUT = 8.0


@pytest.mark.slow
def test_s2_hang_times_out_and_leaves_no_rank_running(tmp_path):
    from migrator import api

    tree = tmp_path / "tree"
    tree.mkdir()
    mark = tmp_path / "rank1-hangs"
    (tree / "validate.py").write_text(PROTOCOL.replace("HANG_MARK", repr(str(mark))))
    work = tmp_path / "work"
    warm_zygote()
    t0 = time.monotonic()
    result = api.validate(tree, migrated=str(tree), stages=("S2",), timeout=TIMEOUT, work_dir=str(work))
    assert time.monotonic() - t0 < 90
    assert mark.exists(), f"rank 1 never reached its forward within {TIMEOUT:g} s: {result.text()}"
    s2 = result.stage("S2")
    assert s2.status in ("fail", "error"), result.text()
    assert "timed out" in (s2.reason or "") or "timeout" in (s2.reason or "").lower(), s2.reason
    # the run's folders: a rank forked from a zygote names none on its command line, but works in the tree
    assert survivors(str(tmp_path)) == [], "a rank outlived the S2 timeout"
