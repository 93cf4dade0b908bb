"""The optimizer step in msprobe dumps (issue 37 item 3): a parameter's update judged against the size of the
update, not of the parameter; a decay or hyper-parameter the port changed named in the optimizer's words. Tiny
hand-written dumps in msprobe 26's layout (`dump.json`, `construct.json`'s `optimizer` scope, `.pt` files)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from migrator.validation.parent.interop.msprobe_compare import compare_dumps
from tests.validation.msprobe_kit import tensor_record, write_rank

LR, WD, N = 1e-3, 0.05, 256


def _slot(value: torch.Tensor | float, name: str, folder: Path | None, requires_grad: bool = False) -> dict:
    if not isinstance(value, torch.Tensor):
        return {"type": "float", "value": value}
    return tensor_record(value, name, folder, requires_grad)


def _adamw_dump(root: Path, param: torch.Tensor, update: torch.Tensor, *, task: str = "tensor",
                decay: float = 0.0, eps: float = 1e-8, noise: torch.Tensor | None = None, level: str = "mix") -> Path:
    """A linear's forward (module record holding `param` as its weight) and one AdamW step on it as torch's
    single-tensor AdamW records it: [mul_ (decay),] lerp_, mul_, addcmul_, sqrt, truediv, add_ (eps), addcdiv_.
    `update` is the step the addcdiv_ adds; `noise` is added to the new value (the port's rounding). Level L1: no
    module record and an empty construct.json; the optimizer's records are known by their stack only."""
    folder = root / "step0" / "rank0"
    (folder / "dump_tensor_data").mkdir(parents=True)
    data_dir = folder if task == "tensor" else None
    records: dict[str, dict] = {}

    def record(key: str, inputs: list, output: torch.Tensor, self_is_param: bool = False, **kwargs: float) -> None:
        records[key] = {"input_args": [_slot(v, f"{key}.input.{i}", data_dir, self_is_param and i == 0)
                                       for i, v in enumerate(inputs)],
                        "input_kwargs": {k: _slot(v, "", None) for k, v in kwargs.items()},
                        "output": [_slot(output, f"{key}.output.0", data_dir, self_is_param)]}

    x = torch.linspace(-1, 1, 16).reshape(1, 16)
    records["Module.fc.Linear.forward.0" if level == "mix" else "Functional.linear.0.forward"] = {"input_args": [_slot(x, "m.in", data_dir)], "input_kwargs": {},
                                             "output": [_slot(x @ param.T, "m.out", data_dir)],
                                             "parameters": {"weight": _slot(param, "m.w", data_dir, True)}}
    grad = update.sign() * 0.1
    p = param
    if decay:
        record("Tensor.mul_.0.forward", [p, 1 - LR * decay], p * (1 - LR * decay), self_is_param=True)
        p = p * (1 - LR * decay)
    record("Tensor.lerp_.0.forward", [torch.zeros_like(p), grad, 0.1], 0.1 * grad)
    record("Tensor.mul_.1.forward", [torch.zeros_like(p), 0.999], torch.zeros_like(p))
    record("Tensor.addcmul_.0.forward", [torch.zeros_like(p), grad, grad], 1e-3 * grad * grad, value=1e-3)
    root_v = (1e-3 * grad * grad).sqrt()
    record("Tensor.sqrt.0.forward", [1e-3 * grad * grad], root_v)
    record("Tensor.__truediv__.0.forward", [root_v, 0.0316], root_v / 0.0316)
    record("Tensor.add_.0.forward", [root_v / 0.0316, eps], root_v / 0.0316 + eps)
    new = p + update + (noise if noise is not None else 0.0)
    record("Tensor.addcdiv_.0.forward", [p, 0.1 * grad, root_v / 0.0316 + eps], new, self_is_param=True, value=-LR)
    optimizer_keys = [k for k in records if not k.startswith("Module.")]
    if level == "mix":
        write_rank(folder, records, {"Module.fc.Linear.forward.0": None} | dict.fromkeys(optimizer_keys, "optimizer"),
                   level=level, task=task)
    else:
        frames = ["File /venv/site-packages/torch/optim/adamw.py, line 210, in step, ...",
                  "File /work/train.py, line 12, in train_step, optimizer.step()"]
        write_rank(folder, records, {}, {"0": [optimizer_keys, frames]}, level=level, task=task)
    return root


@pytest.fixture(scope="module")
def near_zero() -> tuple[torch.Tensor, torch.Tensor]:
    """A parameter that the step moves across zero (its new value is a twentieth of the update's size)."""
    torch.manual_seed(0)
    update = LR * torch.randn(N, 16).sign()
    return -0.95 * update, update


def test_a_parameter_update_is_judged_against_the_size_of_the_update(tmp_path, near_zero):
    param, update = near_zero
    golden = _adamw_dump(tmp_path / "g", param, update)
    rounding = 5e-5 * LR * torch.randn(N, 16)  # 5e-5 of the update, 1e-3 of the new value: past the forward bound
    port = compare_dumps(str(_adamw_dump(tmp_path / "t", param, update, noise=rounding)), str(golden))
    assert port.exit_code == 0, port.first_divergence
    new_value = next(s for r in port.records if r.api == "Tensor.addcdiv_" for s in r.slots if s.slot == "output.0")
    assert new_value.metric == "update_rel_l2" and new_value.value < 1e-4

    wrong = compare_dumps(str(_adamw_dump(tmp_path / "w", param, 1.01 * update)), str(golden))  # 1 % off the step
    assert wrong.exit_code == 1
    assert wrong.first_divergence.api == "Tensor.addcdiv_" and wrong.first_divergence.worst.metric == "update_rel_l2"


@pytest.mark.parametrize(("task", "decays"), [("tensor", "port"), ("statistics", "port"), ("statistics", "original")])
def test_a_decay_only_one_side_applies_fails_naming_weight_decay_and_the_parameter(tmp_path, task, decays):
    torch.manual_seed(1)
    param, update = 0.02 * torch.randn(N, 16), LR * torch.randn(N, 16).sign()
    port_decay, original_decay = (WD, 0.0) if decays == "port" else (0.0, WD)
    golden = _adamw_dump(tmp_path / "g", param, update, task=task, decay=original_decay)
    result = compare_dumps(str(_adamw_dump(tmp_path / "t", param, update, task=task, decay=port_decay)), str(golden))
    first = result.first_divergence
    assert result.exit_code == 1 and first.scope == "optimizer"
    assert first.key == ("Tensor.mul_.0.forward" if decays == "port" else "Tensor.addcdiv_.0.forward")
    other = "original" if decays == "port" else "port"
    assert first.argument_diffs == (f"weight_decay: the {decays}'s optimizer decays fc.weight (mul_ by "
                                    f"{1 - LR * WD!r} = 1 − lr × weight_decay), the {other}'s does not",)


def test_another_eps_is_named_as_the_optimizer_s_eps(tmp_path, near_zero):
    param, update = near_zero
    golden = _adamw_dump(tmp_path / "g", param, update, task="statistics", eps=1e-5)
    result = compare_dumps(str(_adamw_dump(tmp_path / "t", param, update, task="statistics", eps=1e-8)), str(golden))
    first = result.first_divergence
    assert result.exit_code == 1 and first.api == "Tensor.add_" and first.scope == "optimizer"
    assert first.argument_diffs == ("input_args.1: 1e-05 → 1e-08 (the optimizer's eps)",)


def test_without_construct_json_the_optimizer_is_known_by_its_stack(tmp_path):
    """Level L1 writes an empty construct.json: the decay check and the optimizer's words still apply."""
    torch.manual_seed(1)
    param, update = 0.02 * torch.randn(N, 16), LR * torch.randn(N, 16).sign()
    golden = _adamw_dump(tmp_path / "g", param, update, task="statistics", level="L1")
    result = compare_dumps(str(_adamw_dump(tmp_path / "t", param, update, task="statistics", level="L1", decay=WD)),
                           str(golden))
    first = result.first_divergence
    assert result.exit_code == 1 and first.scope == "optimizer" and first.user_line.startswith("/work/train.py, line 12")
    assert first.argument_diffs[0].startswith("weight_decay: the port's optimizer decays ")
