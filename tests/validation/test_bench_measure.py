"""`migrate validate --bench` measurement machinery on CPU/gloo: FLOP counts against a formula,
communication share 0 for one rank and > 0 for two, a hanging rank reported as a hang within the
timeout, a NaN at step k reported as an unstable run.

The hang's timeout is short: its zygote has imported torch before the run starts, and the hanging rank
leaves a mark, so the test knows the timeout struck a rank in its forward, not a slow start."""

from __future__ import annotations

import time
from types import SimpleNamespace

import pytest

torch = pytest.importorskip("torch")

from tests.conftest import survivors, warm_zygote  # noqa: E402

PROTOCOL = '''
import os, time, torch
INPUT_KEYS = ("x",)
MODE = os.environ.get("BENCH_TEST_MODE", "ok")

class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.a = torch.nn.Linear(16, 32, bias=False)
        self.b = torch.nn.Linear(32, 8, bias=False)
        self.calls = 0

    def forward(self, x):
        self.calls += 1
        if MODE == "nan" and self.calls == 4:   # steps: warm-up 0, FLOP count 1, timed 2, 3
            x = x * float("nan")
        if MODE == "hang" and int(os.environ.get("RANK", "0")) == 1:
            open(HANG_MARK, "w").close()
            time.sleep(3600)
        return self.b(self.a(x))

def make_model(dropout=0.0):
    torch.manual_seed(0)
    return Net()

def make_batch(step):
    return {"x": torch.randn(8, 16, generator=torch.Generator().manual_seed(step))}

def loss_fn(out, batch):
    return out.float().pow(2).mean()
'''


@pytest.fixture(scope="module")
def tree(tmp_path_factory):
    root = tmp_path_factory.mktemp("bench-tree")
    (root / "validate.py").write_text(PROTOCOL)
    return root


def _opts(tree, **kw):
    from migrator.validation.parent.options import Options

    base = dict(original=str(tree), bench=True, bench_steps=2, bench_warmup=1, bench_profile_steps=2, repeats=1,
                bench_timeout=60.0, world_size=2)
    base.update(kw)
    return Options(**base)


def _linear_stack_flops(batch: int, dims: list[int]) -> int:
    """Exact forward+backward FLOPs of ``nn.Linear(d0, d1), nn.Linear(d1, d2), ...`` on ``batch`` rows
    when the input needs no grad: forward 2·b·in·out per layer, backward 2·b·in·out (weight grad)
    plus 2·b·in·out (input grad) for every layer but the first."""
    total = 0
    for i, (d_in, d_out) in enumerate(zip(dims, dims[1:])):
        mm = 2 * batch * d_in * d_out
        total += mm + mm + (mm if i > 0 else 0)
    return total


def test_flops_linear_stack_exact():
    from migrator.validation.child import flops

    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 8))
    total, per_op, _ = flops.count(lambda: model(torch.randn(4, 16)).sum().backward())
    assert total == _linear_stack_flops(4, [16, 32, 8]) == 14336
    assert set(per_op) == {"addmm", "mm"}


def test_flops_dense_is_6_params_tokens():
    """Bias-free linear layers with an input that needs grad: exactly 6 · params · tokens."""
    from migrator.validation.child import flops

    model = torch.nn.Sequential(torch.nn.Linear(64, 128, bias=False), torch.nn.Linear(128, 64, bias=False))
    tokens = 32
    x = torch.randn(tokens, 64, requires_grad=True)
    total, _, _ = flops.count(lambda: model(x).sum().backward())
    params = sum(p.numel() for p in model.parameters())
    assert total == 6 * params * tokens


def test_comm_share_from_events():
    from migrator.validation.child.bench import STEP_MARK, comm_share

    ev = lambda n, s, e: SimpleNamespace(name=n, time_range=SimpleNamespace(start=s, end=e))  # noqa: E731
    events = [ev(STEP_MARK, 0, 100), ev("c10d::allreduce_", 10, 12), ev("gloo:all_reduce", 11, 40),
              ev("nccl:all_gather", 90, 130), ev("record_param_comms", 0, 100), ev(STEP_MARK, 200, 300)]
    share = comm_share(events)
    assert share["all-reduce"] == pytest.approx(30 / 200)
    assert share["all-gather"] == pytest.approx(10 / 200)
    assert share["total"] == pytest.approx(40 / 200)
    assert share["profiled_steps"] == 2


@pytest.mark.slow
def test_one_rank_no_communication_and_flops(tree, tmp_path):
    from migrator.validation.parent.stages.bench import measure_side

    side = measure_side("S1", "migrated", str(tree), None, _opts(tree), str(tmp_path), None)
    assert side.crash_rate == 0, side.failures
    assert side.measured.comm_share["total"] == 0
    assert side.measured.flops_per_step == _linear_stack_flops(8, [16, 32, 8])
    assert side.measured.samples_per_s > 0 and side.measured.tokens_per_s is None  # float inputs: no token ids
    assert side.measured.mfu is None and side.measured.mfu_note.startswith("n/a")
    assert side.measured.step_time.n == 2


@pytest.mark.slow
def test_two_ranks_communication_share_positive(tree, tmp_path):
    from migrator.validation.parent.stages.bench import measure_side

    side = measure_side("S2", "migrated", str(tree), "ddp", _opts(tree), str(tmp_path), None)
    assert side.crash_rate == 0, side.failures
    assert side.ranks == 2
    assert side.measured.comm_share["total"] > 0
    assert side.measured.comm_share["all-reduce"] > 0
    assert side.measured.flops_per_step == _linear_stack_flops(8, [16, 32, 8])  # 2 ranks x 4 rows


@pytest.mark.slow
def test_hanging_rank_is_a_hang_within_timeout(tmp_path):
    """The mode is written into the program (an environment variable would give the children a zygote of
    their own): they fork off the test process's zygote for every validate run, once it has imported torch."""
    from migrator.validation.parent.stages.bench import measure_side

    tree, work, mark = tmp_path / "tree", tmp_path / "work", tmp_path / "rank1-hangs"
    tree.mkdir()
    hang = PROTOCOL.replace('os.environ.get("BENCH_TEST_MODE", "ok")', '"hang"')
    (tree / "validate.py").write_text(hang.replace("HANG_MARK", repr(str(mark))))
    warm_zygote()
    t0 = time.monotonic()
    side = measure_side("S2", "migrated", str(tree), "ddp", _opts(tree, bench_timeout=6.0), str(work), None)
    assert time.monotonic() - t0 < 40
    assert mark.exists(), "rank 1 never reached its forward before the timeout"
    assert side.crash_rate == 1.0
    assert side.failures[0].kind == "hang"
    assert "6 s" in side.failures[0].reason
    # a rank forked from a zygote names neither folder on its command line, but works in one of them
    left = survivors(str(work)) + survivors(str(tree))
    assert left == [], "a rank outlived the timeout (torchrun starts ranks in their own session)"


@pytest.mark.slow
def test_nan_at_step_k_is_unstable(tree, tmp_path, monkeypatch):
    from migrator.validation.parent.stages.bench import measure_side

    monkeypatch.setenv("BENCH_TEST_MODE", "nan")
    side = measure_side("S1", "migrated", str(tree), None, _opts(tree, repeats=2), str(tmp_path), None)
    assert side.crash_rate == 1.0 and side.ok_repeats == 0
    assert [f.kind for f in side.failures] == ["nan", "nan"]
    assert "step 3" in side.failures[0].reason
