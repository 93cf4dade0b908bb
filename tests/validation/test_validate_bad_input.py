"""Bad input never crashes `migrate validate`: a program that fails on one side fails its stage with
the traceback summarised (later stages "not run"); NaN/Inf in T names the first tensor; mismatched
shapes are "unmatched"; an entry that cannot be imported or bad arguments exit 2."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("safetensors")

from tests.conftest import run_cli  # noqa: E402

TINY = '''
import torch
import torch.nn.functional as F


class Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(16, 16)

    def forward(self, x):
        y = torch.tanh(self.fc(x))
        return y  # BLOCK


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.blocks = torch.nn.ModuleList([Block() for _ in range(2)])
        self.head = torch.nn.Linear(16, 4)  # HEAD

    def forward(self, x):
        for block in self.blocks:
            x = block(x)
        return self.head(x)


INPUT_KEYS = ("x",)


def make_model(dropout=0.0):
    return Net()


def make_batch(step):
    g = torch.Generator().manual_seed(step)
    return {"x": torch.randn(8, 16, generator=g), "y": torch.randint(0, 4, (8,), generator=g)}


def loss_fn(out, batch):
    return F.cross_entropy(out.float(), batch["y"])
'''


def tree(root: Path, name: str, *edits: tuple[str, str], extra: str = "") -> Path:
    path = root / name
    path.mkdir(parents=True)
    text = TINY
    for old, new in edits:
        assert old in text
        text = text.replace(old, new)
    (path / "validate.py").write_text(extra + text)
    return path


def validate(original: Path, migrated: Path, **kw):
    from migrator import api

    kw.setdefault("stages", ("S1", "S2", "S3"))
    return api.validate(original, migrated=str(migrated), **kw)


@pytest.mark.slow
def test_migrated_crash_fails_s1_with_the_traceback_and_later_stages_do_not_run(tmp_path):
    orig = tree(tmp_path, "orig")
    mig = tree(tmp_path, "mig", ("        return y  # BLOCK", "        raise RuntimeError('kernel not implemented')"))
    result = validate(orig, mig)
    s1 = result.stage("S1")
    assert s1.status == "fail" and result.exit_code == 1
    assert "migrated program failed" in s1.reason and "RuntimeError: kernel not implemented" in s1.reason
    assert "validate.py" in s1.reason  # the program's own frame
    assert s1.first_divergence.startswith("blocks.0 (Block)")
    assert [result.stage(s).status for s in ("S2", "S3")] == ["not_run", "not_run"]
    assert "S1 did not pass" in result.stage("S2").reason


@pytest.mark.slow
def test_original_crash_is_could_not_run_never_a_failure_of_the_migration(tmp_path):
    orig = tree(tmp_path, "orig", ("        return y  # BLOCK", "        return y[:, :3]  # BLOCK"))
    mig = tree(tmp_path, "mig")
    result = validate(orig, mig, stages=("S1",))
    s1 = result.stage("S1")
    assert s1.status == "error" and result.exit_code == 2
    assert s1.summary == "could not run: the original program fails" and s1.reason.startswith("could not run: original fails")
    assert "RuntimeError" in s1.reason


@pytest.mark.slow
def test_nan_in_migrated_names_the_first_tensor(tmp_path):
    orig = tree(tmp_path, "orig")
    mig = tree(tmp_path, "mig", ("        return y  # BLOCK", "        return y / (y - y)  # BLOCK"))
    result = validate(orig, mig, stages=("S1",))
    s1 = result.stage("S1")
    assert s1.status == "fail"
    assert s1.reason.startswith("NaN/Inf in the migrated run, first in step0/Module.blocks.0.Block.forward.0.output.0")
    assert s1.first_divergence.startswith("blocks.0 (Block)")


@pytest.mark.slow
def test_mismatched_shapes_fail_s1(tmp_path):
    orig = tree(tmp_path, "orig")
    # same numbers, different intermediate shapes: the fc call sees (1, 8, 16) instead of (8, 16)
    mig = tree(tmp_path, "mig", ("        y = torch.tanh(self.fc(x))", "        y = torch.tanh(self.fc(x.unsqueeze(0))).squeeze(0)"))
    result = validate(orig, mig, stages=("S1",))
    s1 = result.stage("S1")
    # one whole model on both sides: another shape at a module boundary fails, named in every output
    assert s1.status == "fail", result.text()
    assert any("shape (1, 8, 16) vs golden (8, 16)" in u for u in s1.unmatched)
    assert result.to_json()["stages"][1]["unmatched"]["count"] == len(s1.unmatched) > 0
    assert "fail: same tensors and shapes on both sides" in result.text()
    assert "on one side only or of another shape" in s1.summary


@pytest.mark.slow
def test_state_dict_mismatch_fails_as_unmatched(tmp_path):
    orig = tree(tmp_path, "orig")
    mig = tree(tmp_path, "mig", ("torch.nn.Linear(16, 4)  # HEAD", "torch.nn.Linear(16, 5)  # HEAD"))
    result = validate(orig, mig, stages=("S1",))
    s1 = result.stage("S1")
    assert s1.status == "fail" and "unmatched state_dict" in s1.reason and "head.weight" in s1.reason


@pytest.mark.slow
def test_record_to_tar_and_compare(tmp_path):
    from migrator import api

    orig = tree(tmp_path, "orig")
    recorded = api.validate(orig, record=str(tmp_path / "ref.tar.gz"))
    assert recorded.exit_code == 0 and recorded.mode == "record"
    assert recorded.manifest["weights_sha256"]
    result = api.validate(orig, migrated=str(tree(tmp_path, "mig")), compare=str(tmp_path / "ref.tar.gz"),
                          stages=("S1",))
    assert result.stage("S1").status == "pass", result.text()
    assert result.manifest["weights_sha256"] == recorded.manifest["weights_sha256"]


def test_entry_that_cannot_be_imported_exits_2(tmp_path):
    orig = tree(tmp_path, "orig")
    mig = tree(tmp_path, "mig", extra="import not_a_module_anywhere  # noqa\n")
    out = tmp_path / "v.json"
    proc = run_cli("validate", str(orig), "--migrated", str(mig), "--stages", "S1", "-o", str(out), "-q")
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "cannot import 'validate'" in proc.stdout and "not_a_module_anywhere" in proc.stdout
    doc = json.loads(out.read_text())
    assert doc["stages"][1]["status"] == "error" and doc["exit_code"] == 2


def test_original_without_protocol_exits_2(tmp_path):
    (tmp_path / "empty").mkdir()
    proc = run_cli("validate", str(tmp_path / "empty"), "--migrated", str(tmp_path / "empty"), "--stages", "S1", "-q")
    assert proc.returncode == 2 and "no validate.py" in proc.stderr, proc.stdout + proc.stderr


@pytest.mark.parametrize("args,message", [
    (("--stages", "S9"), "unknown stage"),
    (("--record", "a", "--compare", "b"), "exclude each other"),
    (("extra-arg",), "need --script"),
    (("--nnodes", "2"), "--rdzv-endpoint"),
])
def test_bad_arguments_exit_2(tmp_path, args, message):
    proc = run_cli("validate", str(tmp_path), *args)
    assert proc.returncode == 2 and message in proc.stderr, proc.stderr


def test_missing_original_exits_2(tmp_path):
    proc = run_cli("validate", str(tmp_path / "nope"))
    assert proc.returncode == 2 and "no such directory" in proc.stderr


def test_missing_validate_extra_is_one_clear_line_before_anything_runs(tmp_path):
    """Without safetensors the child used to fail and the result read "the original script failed"."""
    import subprocess
    import sys

    blocker = tmp_path / "block"
    blocker.mkdir()
    (blocker / "sitecustomize.py").write_text("import sys\nsys.modules['safetensors'] = None  # not installed\n")
    import os

    repo = Path(__file__).resolve().parents[2]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(blocker), str(repo)]))
    proc = subprocess.run([sys.executable, "-m", "migrator", "validate", str(repo / "samples" / "gpt"), "--stages", "S1"],
                          capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "safetensors" in proc.stderr and "pip install 'ascend-migrate[validate]'" in proc.stderr
    assert "original" not in proc.stdout


def test_a_reference_recorded_in_another_format_exits_2_naming_it(tmp_path):
    """A recorded reference whose status does not match today's record (an older `--record`) is refused
    before anything runs, naming the archive and the field, not read with defaults."""
    import tarfile

    ref = tmp_path / "reference"
    ref.mkdir()
    (ref / "status.json").write_text(json.dumps({"ok": True, "batch_sha256": {"0": "x"},
                                                 "optimizer": {"class": "AdamW", "dir": "d"}}))
    with tarfile.open(tmp_path / "old.tar", "w") as tar:
        tar.add(ref, arcname="reference")
    orig = tree(tmp_path, "orig")
    proc = run_cli("validate", str(orig), "--migrated", str(orig), "--compare", str(tmp_path / "old.tar"),
                   "--stages", "S1")
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "old.tar: not a reference recorded by this version" in proc.stderr and "class" in proc.stderr
