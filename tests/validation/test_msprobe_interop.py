"""msprobe interop, proven with msprobe itself (PyPI mindstudio-probe): dumps its PrecisionDebugger makes
on CPU are read and judged by `migrate validate --msprobe-target/--msprobe-golden`, and the msprobe-format
dump we export is read by `msprobe compare`."""

from __future__ import annotations

import csv
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from migrator.ground.usage_error import UsageError

FIXTURE = Path(__file__).parent / "msprobe_fixture" / "dump_ports.py"


def _msprobe_or_skip():
    pytest.importorskip("torch")
    pytest.importorskip("msprobe.pytorch")


@pytest.fixture(scope="module")
def dumps(tmp_path_factory):
    """One msprobe run per task, in parallel: step0 original, step1 correct port, step2 slipped port."""
    _msprobe_or_skip()
    root = tmp_path_factory.mktemp("msprobe")
    runs = {"tensor": ("tensor", "mix"), "statistics": ("statistics", "L1")}
    procs = {name: subprocess.Popen([sys.executable, str(FIXTURE), str(root / name), task, level],
                                    stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
             for name, (task, level) in runs.items()}
    for name, proc in procs.items():
        _, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, f"{name}: {err[-2000:]}"
    return root


def _step(dumps: Path, task: str, step: int) -> Path:
    return next((dumps / task / f"step{step}").iterdir())  # the proc<pid> folder


@pytest.mark.slow
@pytest.mark.parametrize("task", ["tensor", "statistics"])
def test_correct_port_passes_and_slipped_port_names_the_api(dumps, task):
    from migrator.api import programs as api_programs

    golden = dumps / task / "step0"
    correct = api_programs.compare_msprobe(dumps / task / "step1", golden)
    assert correct.status == "pass" and correct.exit_code == 0 and correct.first_divergence is None
    assert correct.records and not correct.unmatched

    slipped = api_programs.compare_msprobe(dumps / task / "step2", golden)
    assert slipped.status == "fail" and slipped.exit_code == 1
    first = slipped.first_divergence
    assert first.key == "Functional.gelu.0.forward"
    assert first.argument_diffs == ("approximate: 'none' → 'tanh'",)
    assert "dump_ports.py, line" in first.user_line and "gelu" in first.user_line
    by_key = {r.key: r for r in slipped.records}
    assert by_key["Functional.linear.0.forward"].status == "pass"  # before the slip
    assert by_key["Functional.gelu.0.backward"].status != "pass"   # backward entries are judged too
    if task == "tensor":  # the numbers alone fail it too, not only the argument
        output = next(s for s in first.slots if s.slot == "output.0")
        assert output.metric == "rel_l2" and output.status == "fail"
        assert by_key["Module.fc1.Linear.forward.0"].status == "pass"  # L0 module records of the mix level
    else:
        assert any("statistics" in note for note in slipped.notes)


@pytest.mark.slow
@pytest.mark.parametrize("task", ["tensor", "statistics"])
def test_a_removed_op_shifts_no_pairing(dumps, task):
    """Records pair by aligning the call sequences, not by msprobe's call counter: dropping one `* 1.0`
    used to pair every later `Tensor.__mul__` with the wrong call (another shape: a failure)."""
    from migrator.api import programs as api_programs

    refactor = api_programs.compare_msprobe(dumps / task / "step3", dumps / task / "step0")
    assert refactor.exit_code == 0 and refactor.first_divergence is None, [
        (r.key, r.status) for r in refactor.records if r.status != "pass"]
    assert refactor.status == "warn" and any("only in the golden" in u and "__mul__" in u for u in refactor.unmatched)


@pytest.mark.slow
def test_multi_rank_dumps_pair_by_rank(dumps, tmp_path):
    from migrator.api import programs as api_programs

    for side, steps in (("golden", (0, 0)), ("target", (1, 2))):
        for rank, step in enumerate(steps):
            shutil.copytree(_step(dumps, "tensor", step), tmp_path / side / "step0" / f"rank{rank}")
    result = api_programs.compare_msprobe(tmp_path / "target", tmp_path / "golden")
    assert result.first_divergence.label == "step0/rank1"
    assert {r.status for r in result.records if r.label == "step0/rank0"} == {"pass"}


@pytest.mark.slow
def test_cli_over_msprobe_dumps(dumps, tmp_path):
    from tests.conftest import run_cli

    out = tmp_path / "result.json"
    done = run_cli("validate", "--msprobe-target", str(dumps / "tensor" / "step2"),
                   "--msprobe-golden", str(dumps / "tensor" / "step0"), "-o", str(out))
    assert done.returncode == 1, done.stderr
    assert "first divergence: Functional.gelu.0.forward" in done.stdout
    assert json.loads(out.read_text())["first_divergence"]["key"] == "Functional.gelu.0.forward"


@pytest.mark.slow
def test_msprobe_compare_reads_the_dump_we_export(tmp_path):
    _msprobe_or_skip()
    import torch

    from migrator.validation.parent.interop.msprobe_export import export_run
    from tests.validation.test_validate_results import _record

    run = _record(tmp_path / "rec")
    export_run(str(run), str(tmp_path / "golden" / "step0" / "rank0"))
    shutil.copytree(tmp_path / "golden", tmp_path / "target")
    target = tmp_path / "target" / "step0" / "rank0"
    doc = json.loads((target / "dump.json").read_text())
    doc["dump_data_dir"] = str(target / "dump_tensor_data")
    (target / "dump.json").write_text(json.dumps(doc))
    slipped = target / "dump_tensor_data" / "Module.head.Linear.forward.0.output.0.pt"
    torch.save(torch.load(slipped, weights_only=True).neg(), slipped)  # the port flipped a sign
    msprobe = shutil.which("msprobe", path=str(Path(sys.executable).parent)) or "msprobe"
    done = subprocess.run([msprobe, "compare", "-tp", str(target / "dump.json"),
                           "-gp", str(tmp_path / "golden" / "step0" / "rank0" / "dump.json"), "-o", str(tmp_path / "out")],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    rows = {r["NPU Name"]: r for r in csv.DictReader(next((tmp_path / "out").glob("compare_result_*.csv")).open())}
    assert rows["Module.inner.fc.Linear.forward.0.output.0"]["Result"] == "pass"
    assert rows["Module.head.Linear.forward.0.output.0"]["Result"] != "pass"
    assert float(rows["Module.head.Linear.forward.0.output.0"]["Cosine"]) < 0


def test_not_an_msprobe_dump_is_named(tmp_path):
    from migrator.api import programs as api_programs

    (tmp_path / "empty").mkdir()
    with pytest.raises(UsageError, match="empty: no step"):
        api_programs.compare_msprobe(tmp_path / "empty", tmp_path / "empty")
    broken = tmp_path / "step0" / "rank0"
    broken.mkdir(parents=True)
    (broken / "dump.json").write_text("{not json")
    with pytest.raises(UsageError, match=r"rank0/dump.json: not JSON"):
        api_programs.compare_msprobe(tmp_path, tmp_path)


def test_our_msprobe_export_is_read_as_either_side(tmp_path):
    """The dump we export in msprobe's layout goes through the same reader and verdicts as msprobe's own."""
    torch = pytest.importorskip("torch")
    pytest.importorskip("safetensors")
    from migrator.api import programs as api_programs
    from migrator.validation.parent.interop.msprobe_export import export_run
    from tests.validation.test_validate_results import _record

    run = _record(tmp_path / "rec")
    for side in ("golden", "target"):
        export_run(str(run), str(tmp_path / side / "step0" / "rank0"))
    same = api_programs.compare_msprobe(tmp_path / "target", tmp_path / "golden")
    assert same.status == "pass" and {"Module.inner.fc.Linear.forward.0", "Tensor.topk.0.forward"} <= {
        r.key for r in same.records}
    slipped = tmp_path / "target" / "step0" / "rank0" / "dump_tensor_data" / "Module.inner.fc.Linear.forward.0.output.0.pt"
    torch.save(torch.load(slipped, weights_only=True) * 1.01, slipped)
    result = api_programs.compare_msprobe(tmp_path / "target", tmp_path / "golden")
    assert result.first_divergence.key == "Module.inner.fc.Linear.forward.0"
    assert result.first_divergence.worst.slot == "output.0"
