"""When a dump shows the optimizer's update differs but not why (level L0 records no optimizer op), the optimizer
each side's source builds is compared statically and the setting that differs named (issue 37); cause text
only. Tiny hand-written sources and dumps."""

from __future__ import annotations

from pathlib import Path

import torch

from migrator.validation.parent.interop.msprobe_compare import compare_dumps
from migrator.validation.parent.interop.msprobe_dumps import Record
from migrator.validation.parent.interop.msprobe_source_diffs import collective_diffs, optimizer_settings_diff
from tests.validation.msprobe_kit import tensor_record, write_rank

_TRAIN = '''import torch

LR, ADAM_EPS = 1e-3, 1e-5


def make_optimizer(model):
    return torch.optim.AdamW([{"params": model.a, "weight_decay": 0.1}, {"params": model.b, "weight_decay": 0.0}],
                             lr=LR, eps=ADAM_EPS)
'''


def _records(source: Path) -> list[Record]:
    return [Record("Functional.linear.0.forward", "Functional.linear", "forward", 0, 0, (),
                   f"{source}, line 7, in make_optimizer, return torch.optim.AdamW(")]


def test_the_setting_each_source_builds_differently_is_named(tmp_path):
    original, port = tmp_path / "original.py", tmp_path / "port.py"
    original.write_text(_TRAIN)
    port.write_text(_TRAIN.replace(", eps=ADAM_EPS", "").replace('"weight_decay": 0.0', '"weight_decay": 0.1'))
    assert optimizer_settings_diff(_records(port), _records(original)) == (
        "the optimizers the sources build differ: eps ADAM_EPS = 1e-05 → not given (AdamW's default), "
        "param group 1 weight_decay 0.0 → 0.1")
    same = tmp_path / "same.py"  # the same values written otherwise: nothing to name
    same.write_text(_TRAIN.replace("lr=LR, eps=ADAM_EPS", "lr=0.001, eps=1e-5"))
    assert optimizer_settings_diff(_records(same), _records(original)) == ""
    assert optimizer_settings_diff(_records(tmp_path / "missing.py"), _records(original)) == ""


def _step_dump(root: Path, source: Path, eps: float) -> Path:
    """One optimizer record (its `add_` of eps) whose stack runs through torch.optim, from `source`'s line."""
    p = torch.linspace(-1, 1, 8)
    records = {"Tensor.add_.0.forward": {"input_args": [tensor_record(p, requires_grad=True),
                                                        {"type": "float", "value": eps}],
                                         "input_kwargs": {}, "output": [tensor_record(p + eps, requires_grad=True)]}}
    stack = {"0": [["Tensor.add_.0.forward"], ["File /venv/site-packages/torch/optim/adamw.py, line 210, in step, ...",
                                               f"File {source}, line 7, in make_optimizer, \n return"]]}
    write_rank(root / "step0" / "rank0", records, {}, stack, level="L1")
    return root


def test_an_optimizer_divergence_names_the_settings_only_then(tmp_path):
    original, port = tmp_path / "original.py", tmp_path / "port.py"
    original.write_text(_TRAIN)
    port.write_text(_TRAIN.replace(", eps=ADAM_EPS", ""))
    result = compare_dumps(str(_step_dump(tmp_path / "t", port, 1e-8)), str(_step_dump(tmp_path / "g", original, 1e-5)))
    assert result.exit_code == 1 and result.first_divergence.scope == "optimizer"
    assert result.in_source == ("the optimizers the sources build differ: eps ADAM_EPS = 1e-05 → not given "
                                "(AdamW's default)",)
    alike = compare_dumps(str(_step_dump(tmp_path / "a", port, 1e-5)), str(_step_dump(tmp_path / "g", original, 1e-5)))
    assert alike.exit_code == 0 and alike.in_source == ()  # no divergence: the sources are not read


_PARALLEL = '''import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn


class CopyToRegion(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x.view_as(x)

    @staticmethod
    def backward(ctx, grad):
        dist.all_reduce(grad)
        return grad


class ColumnLinear(nn.Module):
    def forward(self, x):
        return F.linear(CopyToRegion.apply(x), self.weight)
'''


def test_the_collectives_a_module_calls_through_its_functions_are_compared_by_direction(tmp_path):
    original, port = tmp_path / "original.py", tmp_path / "port.py"
    original.write_text(_PARALLEL)
    port.write_text(_PARALLEL.replace("        dist.all_reduce(grad)\n", ""))
    backward = "Module.layers.0.up.ColumnLinear.backward.0"
    assert collective_diffs(_records(port), _records(original), backward) == (
        "collectives in the source of ColumnLinear's backward: CopyToRegion.backward calls all_reduce in the "
        "original, none in the port")
    assert collective_diffs(_records(port), _records(original), backward.replace("backward", "forward")) == ""
    assert collective_diffs(_records(original), _records(original), backward) == ""
    assert collective_diffs(_records(port), _records(original), "Functional.linear.0.backward") == ""
