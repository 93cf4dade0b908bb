"""`migrate validate --kernel` on real Triton kernels (issue 41, acceptance 3), through the benchmark's own
drivers (bench/kernel_validation.py): Liger-Kernel's softmax, RMS norm, layer norm, cross-entropy and rotary
kernels and fla's matmul, from pinned PyPI sdists. The port `migrate fix` makes passes under Triton's
interpreter; each seeded slip fails, naming the kernel, the first differing element and the block of the
original that wrote it. Skips when PyPI is unreachable or upstream triton is absent."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from migrator.reporters.kernel_validation import render_text
from migrator.validation.verdict import Verdict

BENCH = Path(__file__).resolve().parents[2] / "bench"
pytestmark = [pytest.mark.network, pytest.mark.slow,
              pytest.mark.skipif(importlib.util.find_spec("triton") is None, reason="upstream triton absent (the `kernels` extra)")]


def _bench(monkeypatch):
    monkeypatch.syspath_prepend(str(BENCH))
    import kernel_validation

    return kernel_validation


@pytest.mark.parametrize("name", ["softmax", "rms_norm", "layer_norm", "cross_entropy", "rope", "matmul"])
def test_a_real_kernel_s_port_passes_and_each_seeded_slip_fails_at_its_block(tmp_path, monkeypatch, name):
    bench = _bench(monkeypatch)
    from sdists import IndexUnreachable

    spec = bench.KERNELS[name]
    try:
        tree = bench.fetch_tree(bench.PINS[spec.pin])
    except IndexUnreachable as exc:
        pytest.skip(f"PyPI unreachable: {exc}")
    outcome = bench.run_one(name, tree, tmp_path)
    assert outcome.port.error is None, outcome.port.error
    assert outcome.port.verdict == Verdict.PASS
    assert outcome.port.seconds_original is not None and outcome.port.seconds_ported is not None
    assert len(outcome.slipped) == len(spec.slips)
    for slip, failed in zip(spec.slips, outcome.slipped):
        assert failed.error is None, failed.error
        assert failed.verdict == Verdict.FAIL, slip
        out = next(o for o in failed.outputs if o.verdict == Verdict.FAIL)
        assert out.first is not None and out.first.block == spec.owner(out.first.coords), slip
        shown = render_text(failed)
        assert f"kernel `{spec.kernel}`: FAIL" in shown
        assert f"`{out.name}`{list(out.first.coords)}" in shown and f"block (program id) {out.first.block}" in shown
