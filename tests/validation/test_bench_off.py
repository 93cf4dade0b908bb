"""--bench off costs nothing: no bench module imported, no profiler, no timed repeats; the peak
table never guesses."""

from __future__ import annotations

import subprocess
import sys

import pytest

from migrator.validation.parent import stages
from migrator.validation.parent.options import Options
from migrator.validation.parent.perf.records import StagePerf
from migrator.validation.parent.results import StageResult


def test_validation_modules_do_not_import_bench():
    code = ("import sys, migrator.validation.child.worker, migrator.validation.child.parallel, migrator.validation.parent.stages, "
            "migrator.validation.child.execute, migrator.validation.parent.results;"
            "bad = [m for m in sys.modules if m.startswith(('migrator.validation.child.bench', 'migrator.validation.child.flops',"
            " 'torch.profiler', 'torch.utils.flop_counter'))]; print(bad); assert not bad")
    subprocess.run([sys.executable, "-c", code], check=True)


def _fake_run(monkeypatch, tmp_path, bench: bool):
    calls = []
    monkeypatch.setitem(stages.PROTOCOL.stages, "S1", lambda ctx: StageResult("S1", "pass", summary="fake"))
    for mod in [m for m in sys.modules if m.startswith(("migrator.validation.child.bench",
                                                         "migrator.validation.parent.stages.bench"))]:
        monkeypatch.delitem(sys.modules, mod)
    if bench:
        import migrator.validation.parent.stages.bench as bs

        monkeypatch.setattr(bs, "stage_perf", lambda ctx: calls.append(ctx.stage) or StagePerf())
    (tmp_path / "validate.py").write_text("# the protocol's place (S1 is faked)\n")
    opts = Options(original=str(tmp_path), migrated=str(tmp_path), stages=("S1",), bench=bench)
    return stages.run(opts), calls


def test_bench_off_installs_nothing(monkeypatch, tmp_path):
    result, _ = _fake_run(monkeypatch, tmp_path, bench=False)
    assert "migrator.validation.child.bench" not in sys.modules
    assert "migrator.validation.parent.stages.bench" not in sys.modules
    assert "perf" not in result.stage("S1").to_json().get("bench", {})
    assert "bench" not in result.to_json()


def test_bench_on_benchmarks_each_run_stage(monkeypatch, tmp_path):
    result, calls = _fake_run(monkeypatch, tmp_path, bench=True)
    assert calls == ["S1"]
    assert "perf" in result.stage("S1").to_json().get("bench", {})
    assert "scaling" in result.to_json()["bench"]


def test_bench_rejects_script_mode(tmp_path):
    with pytest.raises(stages.ValidationSetupError):
        stages.run(Options(original=str(tmp_path), bench=True, script="train.py"))


@pytest.mark.parametrize("name,expect", [("NVIDIA H100 80GB HBM3", 989.4), ("NVIDIA A100-SXM4-80GB", 312.0),
                                         ("NVIDIA H200", 989.4), ("NVIDIA H100 PCIe", None), ("NVIDIA H200 NVL", None),
                                         ("Ascend910B3", None), ("Ascend (emulated on CPU)", None), ("cpu (x86_64)", None)])
def test_peak_table(name, expect):
    from migrator.validation.parent.perf.peaks import PEAKS, lookup

    got = lookup(name, "bfloat16")
    assert got["tflops"] == expect
    if expect is None:
        assert got["why"].startswith("n/a")
    assert all(p.source.count("http") >= 1 for p in PEAKS)
    assert lookup(name, "bfloat16", override=400.0)["tflops"] == 400.0
