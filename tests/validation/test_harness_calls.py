"""Every call the harness makes on the program's objects uses the object's own defaults (issue 45): an
optimizer that refuses ``zero_grad(set_to_none=True)`` (torch_npu's and Apex's fused ones), a model whose
``zero_grad`` takes no argument and a scaler whose ``update`` takes none each run through the harness's
call sites; a refusal of an argument of ours is a harness status naming our line, never the program's."""

from __future__ import annotations

from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

PROTOCOL = '''
import torch
import torch.nn.functional as F
{imports}

INPUT_KEYS = ("input",)


def make_model(dropout=0.0):
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))


def make_batch(step):
    g = torch.Generator().manual_seed(100 + step)
    return {{"input": torch.randn(4, 8, generator=g), "target": torch.randint(0, 4, (4,), generator=g)}}


def loss_fn(out, batch):
    return F.cross_entropy(out.float(), batch["target"])


def make_optimizer(model):
    return {optimizer}(model.parameters(), lr=1e-2, weight_decay=1e-2)
'''


USER_LOOP = '''

def train_step(model, optimizer, loss, scaler):
    loss.backward()
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
'''


def _protocol(root: Path, optimizer: str, imports: str = "", loop: str = "") -> Path:
    root.mkdir(parents=True)
    (root / "validate.py").write_text(PROTOCOL.format(imports=imports, optimizer=optimizer) + loop)
    return root


@pytest.mark.slow
def test_a_fused_npu_adamw_port_of_a_protocol_without_train_step_passes_s1(tmp_path):
    from migrator import api

    original = _protocol(tmp_path / "original", "torch.optim.AdamW")
    migrated = _protocol(tmp_path / "migrated", "torch_npu.optim.NpuFusedAdamW", "import torch_npu")
    result = api.validate(original, migrated=str(migrated), stages=("S1",), steps=(0,))
    assert result.stage("S1").status in ("pass", "warn"), result.text()
    assert result.exit_code == 0, result.text()
    assert "set_to_none" not in result.text()


@pytest.mark.slow
def test_the_users_own_set_to_none_call_on_a_fused_optimizer_fails_s1_naming_that_call(tmp_path):
    """The opposite case is the port's: its own loop asks a torch_npu fused optimizer for ``set_to_none=True``."""
    from migrator import api

    original = _protocol(tmp_path / "original", "torch.optim.AdamW", loop=USER_LOOP)
    migrated = _protocol(tmp_path / "migrated", "torch_npu.optim.NpuFusedAdamW", "import torch_npu", USER_LOOP)
    result = api.validate(original, migrated=str(migrated), stages=("S1",), steps=(0,))
    stage = result.stage("S1")
    assert stage.status == "fail" and result.exit_code == 1, result.text()
    assert "validate.py:" in stage.reason and "optimizer.zero_grad(set_to_none=True)" in stage.reason, stage.reason
    assert "call zero_grad(set_to_none=False)" in stage.reason, stage.reason


# ------------------------------------------------------------------ each harness call site, in process
class RefusingSGD(torch.optim.SGD):
    """Apex-style: ``zero_grad(set_to_none=False)``, ``True`` refused like torch_npu's fused optimizers."""

    def zero_grad(self, set_to_none: bool = False) -> None:
        if set_to_none:
            raise ValueError("set_to_none is not supported in fused optimizers")
        super().zero_grad(set_to_none=False)


class BrokenZeroGrad(torch.optim.SGD):
    def zero_grad(self, set_to_none: bool = False) -> None:
        raise RuntimeError("this optimizer cannot clear its gradients")


class NoArgScaler:
    """A loss scaler with torch's calls but no arguments to ``update`` and no ``is_enabled``/``get_scale``."""

    def __init__(self) -> None:
        self.updates = 0

    def scale(self, loss):
        return loss * 4.0

    def unscale_(self, optimizer) -> None:
        for group in optimizer.param_groups:
            for p in group["params"]:
                if p.grad is not None:
                    p.grad.div_(4.0)

    def step(self, optimizer) -> None:
        optimizer.step()

    def update(self) -> None:
        self.updates += 1


def _entry(make_optimizer, train_step=None, make_scaler=None):
    from migrator.validation.child.protocol import Entry

    def make_model(dropout=0.0):
        torch.manual_seed(0)
        return torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))

    def make_batch(step):
        g = torch.Generator().manual_seed(100 + step)
        return {"input": torch.randn(4, 8, generator=g), "target": torch.randint(0, 4, (4,), generator=g)}

    return Entry(source=__file__, make_model=make_model, make_batch=make_batch,
                 loss_fn=lambda out, batch: torch.nn.functional.cross_entropy(out, batch["target"]),
                 make_optimizer=make_optimizer, train_step=train_step, make_scaler=make_scaler,
                 input_keys=("input",))


def _train(entry):
    from migrator.validation.child import execute
    from migrator.validation.child.recorder import Recorder

    weights = entry.make_model().state_dict()
    batches = [entry.make_batch(s) for s in range(3)]
    return execute.train_updates(entry, weights, batches, "cpu", "fp32", "amp", 0, Recorder)


def _fused_npu_adamw(model):
    from migrator.validation.child.npu_emulation.optim import NpuFusedAdamW

    return NpuFusedAdamW(model.parameters(), lr=1e-2)


def _apex_fused_adam(model):
    from migrator.validation.child.cuda_reference.apex.optimizers.fused_adam import FusedAdam

    return FusedAdam(model.parameters(), lr=1e-2)


@pytest.mark.parametrize("make_optimizer", [
    _fused_npu_adamw, _apex_fused_adam, lambda model: RefusingSGD(model.parameters(), lr=0.1, momentum=0.9),
], ids=["torch_npu NpuFusedAdamW", "apex FusedAdam", "refuses set_to_none=True"])
def test_the_harness_loop_clears_grads_with_the_optimizers_own_default(make_optimizer):
    _, facts = _train(_entry(make_optimizer))
    assert len(facts["losses"]) == 3
    zero_grads = [e for e in facts["phases"] if e["phase"] == "zero_grad"]
    assert [e["step"] for e in zero_grads] == [0, 1, 2]
    assert all(e["args"] == {} for e in zero_grads)  # no argument of ours


def test_a_scaler_whose_update_takes_no_argument_runs_the_programs_train_step():
    scaler = NoArgScaler()

    def train_step(model, optimizer, loss, scaler):
        scaler.scale(loss).backward()
        scaler.unscale_(optimizer)
        scaler.step(optimizer)
        scaler.update()
        optimizer.zero_grad()

    _, facts = _train(_entry(lambda m: torch.optim.SGD(m.parameters(), lr=0.1), train_step, lambda: scaler))
    assert scaler.updates == 3
    assert facts["scaler"]["class"] == "NoArgScaler" and facts["scaler"]["trajectory"] == []
    assert [e["phase"] for e in facts["phases"] if e["step"] == 0] == ["backward", "unscale", "step", "zero_grad"]


def test_a_model_whose_zero_grad_takes_no_argument_runs_the_bench_step():
    from types import SimpleNamespace

    from migrator.validation.child.bench import _Repeat

    class OwnZeroGrad(torch.nn.Linear):
        cleared = 0

        def zero_grad(self) -> None:  # no set_to_none
            OwnZeroGrad.cleared += 1
            super().zero_grad()

    model = OwnZeroGrad(8, 4)
    repeat = SimpleNamespace(job=SimpleNamespace(bf16_policy="amp"), device="cpu", call=model, model=model,
                             args=(torch.randn(2, 8),), kwargs={}, data=None,
                             entry=SimpleNamespace(loss_fn=lambda out, batch: out.pow(2).mean()))
    loss = _Repeat.step(repeat)
    assert torch.isfinite(loss) and OwnZeroGrad.cleared == 1
    assert all(p.grad is None for p in model.parameters())  # nn.Module's own default frees them


def test_a_failure_inside_our_call_is_a_harness_status_naming_our_line():
    """The innermost frame is the program's (its zero_grad), but the call is ours: exit 2, not "program failed"."""
    from migrator.validation.child.errors import describe, failure_phase

    tree = str(Path(__file__).parent)  # this file stands for the program's tree
    with pytest.raises(Exception) as caught:
        _train(_entry(lambda m: BrokenZeroGrad(m.parameters(), lr=0.1)))
    exc = caught.value
    assert failure_phase(exc, tree) == "harness"
    info = describe(exc, tree)
    assert info["harness_frame"].startswith("migrator/validation/child/execute.py:"), info
    assert "optimizer.zero_grad()" in info["summary"] and "cannot clear its gradients" in info["summary"]
