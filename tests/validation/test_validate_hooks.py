"""Harness errors are never the user's fault (issue 24 item 1): every optional protocol hook, absent and
present, runs through every stage's child without a harness error; an exception raised in our own code is a
"harness error" (exit 2) naming our frame, never "the original program failed"."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("safetensors")

from tests.validation import hook_matrix  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
STAGES = ("S0", "S1", "S2", "S3")


@pytest.fixture(scope="module")
def matrix(tmp_path_factory) -> dict[str, dict]:
    """Both sides of every variant, one child process per side, side by side as validate runs them (each
    variant's migrated S1 waits for the weights its original writes)."""
    root = tmp_path_factory.mktemp("hook-matrix")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])),
               OMP_NUM_THREADS="1", HOOK_MATRIX_PORT=str(29500 + os.getpid() % 400))
    sides = {side: subprocess.Popen([sys.executable, "-m", "tests.validation.hook_matrix", side, str(root)],
                                    cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for side in ("original", "migrated")}
    out = {}
    try:
        for side, proc in sides.items():
            stdout, stderr = proc.communicate(timeout=300)
            assert proc.returncode == 0, (side, stderr[-3000:])
            out[side] = json.loads(stdout.strip().splitlines()[-1])
    finally:
        for proc in sides.values():
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    return out


def _status(matrix, variant: str, stage: str) -> dict:
    return matrix["original" if stage == "S1" and variant.endswith("@original") else "migrated"][
        variant.removesuffix("@original")][stage]


@pytest.mark.parametrize("stage", STAGES)
@pytest.mark.parametrize("hook", hook_matrix.HOOKS)
@pytest.mark.parametrize("present", [True, False], ids=["present", "absent"])
def test_every_optional_hook_runs_in_every_stage(matrix, hook, stage, present):
    variant = "all" if present else f"without-{hook}"
    assert (hook in hook_matrix.variant_hooks(variant)) is present
    for where in ([variant, f"{variant}@original"] if stage == "S1" else [variant]):
        status = _status(matrix, where, stage)
        assert status["ok"] and status["phase"] is None, (where, stage, status)
        assert status["harness_frame"] is None
        if stage == "S0":
            assert status["checks"] and set(status["checks"]) == {"pass"}, status
    if stage == "S1":  # the k-step training comparison runs wherever there is an optimizer
        with_optimizer = "make_optimizer" in hook_matrix.variant_hooks(variant)
        assert _status(matrix, variant, "S1")["train"] == (["bf16", "fp32"] if with_optimizer else [])
    if stage == "S2":  # a declared plan is used; without one, the harness's own DDP and FSDP2
        declared = "parallelize" in hook_matrix.variant_hooks(variant)
        assert _status(matrix, variant, "S2")["variants"] == (["ddp"] if declared else ["ddp", "fsdp2"])


def test_the_minimal_protocol_runs_everywhere(matrix):
    assert hook_matrix.variant_hooks("none") == ()
    for stage in STAGES:
        assert _status(matrix, "none", stage)["ok"], stage
    assert _status(matrix, "none@original", "S1")["ok"]


def test_dropout_that_stays_on_is_neutralised_in_every_stage_and_measured_in_s1(matrix):
    for stage in STAGES:
        assert _status(matrix, "dropout", stage)["ok"], stage
    for where in ("dropout", "dropout@original"):
        facts = _status(matrix, where, "S1")["dropout"]
        assert facts["sites"] == {"_root": [0.5]} and facts["neutralised"] is True
        stats = facts["statistics"]
        assert len(stats["losses"]) == 8 and 0.4 < stats["kept"]["_root"][0] / stats["kept"]["_root"][1] < 0.6
    for stage in ("S2", "S3"):
        assert any("neutralised in every run of this stage" in n for n in _status(matrix, "dropout", stage)["notes"])
    assert _status(matrix, "all", "S1")["dropout"] == {"sites": {}, "neutralised": False}


def test_an_exception_in_our_code_is_a_harness_error_not_the_program(tmp_path, monkeypatch):
    """Our own code raising (here: the training loop's step count broken in every child) is exit 2, 'harness
    error', with our frame named: never 'the original program failed'."""
    from migrator import api

    breaker = tmp_path / "breaker"
    breaker.mkdir()
    (breaker / "sitecustomize.py").write_text(
        "import os\nif os.environ.get('MIGRATE_VALIDATION_CHILD'):\n"
        "    from migrator.validation.child import execute\n    execute.TRAIN_STEPS = None  # range(None) raises\n")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(breaker), str(REPO)]))
    tree = tmp_path / "tree"
    tree.mkdir()
    (tree / "validate.py").write_text(hook_matrix.source(hook_matrix.HOOKS))
    result = api.validate(tree, migrated=str(tree), stages=("S1",))
    s1 = result.stage("S1")
    assert result.exit_code == 2 and s1.status == "error", result.text()
    assert s1.summary == "harness error on the original side"
    assert "migrator/validation/child/execute.py:" in s1.reason and "in train_updates" in s1.reason, s1.reason
    assert "program failed" not in result.text()


def test_who_raised_is_read_from_the_traceback(tmp_path):
    from migrator.validation.child import errors

    tree = tmp_path / "tree"
    tree.mkdir()
    (tree / "prog.py").write_text("import torch\n\n\ndef boom():\n    raise ValueError('from the program')\n\n\n"
                                  "def bad_matmul():\n    return torch.ones(2, 3) @ torch.ones(2, 3)\n")
    sys.path.insert(0, str(tree))
    try:
        import prog  # type: ignore[import-not-found]

        try:
            errors.failure_phase(None, None)  # type: ignore[arg-type]  # our frame raises (None has no traceback)
        except AttributeError as exc:
            ours = exc
        try:
            prog.boom()
        except ValueError as exc:
            theirs = exc
        import torch

        from migrator.validation.child.dropout import Dropout

        try:  # the op raises inside our TorchFunctionMode (the dropout census): still the program's error
            with Dropout(torch.nn.Linear(1, 1), neutral=True):
                prog.bad_matmul()
        except RuntimeError as exc:
            through_us = exc
        try:  # torch's autograd raises below a call our code made: the program's broken graph
            torch.ones(2).backward()
        except RuntimeError as exc:
            in_torch = exc
    finally:
        sys.path.remove(str(tree))
        sys.modules.pop("prog", None)
    assert errors.failure_phase(ours, str(tree)) == "harness"
    assert "migrator/validation/child/errors.py" in errors.describe(ours, str(tree))["harness_frame"]
    assert errors.failure_phase(theirs, str(tree)) == "run" and "harness_frame" not in errors.describe(theirs, str(tree))
    assert errors.failure_phase(errors.CannotRun("batch does not split"), str(tree)) == "harness"
    assert errors.failure_phase(through_us, str(tree)) == "run"
    assert errors.failure_phase(in_torch, str(tree)) == "run"
