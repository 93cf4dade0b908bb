"""Real level-L1 dumps (issue 37): construct.json is `{}`, so each record's module is rebuilt from stack.json and
the user's source — the loop element a block is (`blocks.1`), the call of a one-line forward a record belongs to
(`fc1` of `self.fc2(self.act(self.fc1(x)))`), the module whose forward applied an autograd.Function whose
backward calls a collective — and the fused op checks that pair by module work at L1 too. Tiny hand-written
dumps whose stacks are written as msprobe writes them (innermost frame first, equal stacks grouped)."""

from __future__ import annotations

from pathlib import Path

import torch

from migrator.validation.parent.interop.msprobe_compare import compare_dumps
from tests.validation.msprobe_kit import tensor_record, write_rank

_SOURCE = '''import torch
import torch.distributed as dist
import torch.nn.functional as F
import torch_npu
from torch import nn


class Mlp(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1, self.act, self.fc2 = nn.Linear(4, 4), nn.GELU(), nn.Linear(4, 4)

    def forward(self, x):
        return self.fc2(self.act(self.fc1(x)))


class Block(nn.Module):
    def __init__(self, shift):
        super().__init__()
        self.shift = shift
        self.mlp = Mlp()

    def forward(self, x):
        x = torch.roll(x, self.shift, 1)
        return x + self.mlp(x)


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.blocks = nn.ModuleList([Block(i) for i in range(2)])

    def forward(self, x):
        for blk in self.blocks:
            x = blk(x)
        return x


class CopyToRegion(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x.view_as(x)

    @staticmethod
    def backward(ctx, grad):
        dist.all_reduce(grad)
        return grad


class ColumnLinear(nn.Module):
    def __init__(self):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(4, 4))

    def forward(self, x):
        return F.linear(CopyToRegion.apply(x), self.weight)


class RMSNorm(nn.Module):
    def __init__(self):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(4))

    def forward(self, x):
        return self.weight * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-5))

    def fused(self, x):
        return torch_npu.npu_rms_norm(x, self.weight)[0]


class Tower(nn.Module):
    def __init__(self):
        super().__init__()
        self.norm, self.up, self.down = RMSNorm(), ColumnLinear(), ColumnLinear()

    def forward(self, x):
        return self.down(self.up(self.norm(x)))
'''
_TORCH = "/venv/lib/python3.11/site-packages/torch"
_CALL = [f"File {_TORCH}/nn/modules/module.py, line 1789, in _call_impl, \n return forward_call(*args, **kwargs)",
         f"File {_TORCH}/nn/modules/module.py, line 1778, in _wrapped_call_impl, \n return self._call_impl(*args)"]
_STEP = ["File /work/bench/dump.py, line 54, in _step, \n loss = loss_fn(model(*args), batch)"]


def _frame(source: Path, snippet: str, func: str = "forward") -> str:
    """The frame of the source line that holds `snippet`."""
    line = next(i for i, text in enumerate(source.read_text().splitlines(), 1) if snippet in text)
    return f"File {source}, line {line}, in {func}, \n {snippet}"


def _record(*tensors: torch.Tensor, out: torch.Tensor, grad: bool = True, **values) -> dict:
    return {"input_args": [tensor_record(t, requires_grad=grad) for t in tensors],
            "input_kwargs": {k: {"type": type(v).__name__, "value": v} for k, v in values.items()},
            "output": [tensor_record(out, requires_grad=grad)]}


def _blocks_dump(root: Path, source: Path, *, last_shift: int = 1, fc1_scale: float = 1.0) -> Path:
    """Model(x) through two Blocks (roll, then x + mlp(x)), msprobe's L1 records and grouped stacks."""
    x = torch.linspace(-1, 1, 8).reshape(2, 4)
    weight = torch.linspace(-0.5, 0.5, 16).reshape(4, 4)
    records, groups = {}, {"roll": [], "fc1": [], "act": [], "fc2": [], "add": []}
    for n, shift in enumerate((0, last_shift)):
        rolled = torch.roll(x, shift, 1)
        records[f"Torch.roll.{n}.forward"] = _record(x, out=rolled, shifts=shift)
        h = rolled @ (weight * fc1_scale).T
        records[f"Functional.linear.{2 * n}.forward"] = _record(rolled, weight * fc1_scale, out=h)
        records[f"Functional.gelu.{n}.forward"] = _record(h, out=torch.nn.functional.gelu(h))
        y = torch.nn.functional.gelu(h) @ weight.T
        records[f"Functional.linear.{2 * n + 1}.forward"] = _record(torch.nn.functional.gelu(h), weight, out=y)
        records[f"Tensor.__add__.{n}.forward"] = _record(rolled, y, out=rolled + y)
        x = rolled + y
        for name, key in (("roll", f"Torch.roll.{n}"), ("fc1", f"Functional.linear.{2 * n}"),
                          ("act", f"Functional.gelu.{n}"), ("fc2", f"Functional.linear.{2 * n + 1}"),
                          ("add", f"Tensor.__add__.{n}")):
            groups[name].append(f"{key}.forward")
    block = [*_CALL, _frame(source, "x = blk(x)"), *_CALL, *_STEP]
    mlp = [*_CALL, _frame(source, "return self.fc2(self.act(self.fc1(x)))"), *_CALL,
           _frame(source, "return x + self.mlp(x)"), *block]
    linear = f"File {_TORCH}/nn/modules/linear.py, line 125, in forward, \n return F.linear(input, self.weight)"
    frames = {"roll": [_frame(source, "x = torch.roll(x, self.shift, 1)"), *block],
              "fc1": [linear, *mlp], "fc2": [linear, *mlp],
              "act": [f"File {_TORCH}/nn/modules/activation.py, line 734, in forward, \n return F.gelu(input)", *mlp],
              "add": [_frame(source, "return x + self.mlp(x)"), *block]}
    stack = {str(i): [groups[name], frames[name]] for i, name in enumerate(groups)}
    write_rank(root / "step0" / "rank0", records, {}, stack, level="L1")
    return root


def test_a_loop_over_a_module_list_names_the_element_each_record_ran_in(tmp_path):
    source = tmp_path / "model.py"
    source.write_text(_SOURCE)
    result = compare_dumps(str(_blocks_dump(tmp_path / "t", source, last_shift=-1)),
                           str(_blocks_dump(tmp_path / "g", source)))
    first = result.first_divergence
    assert result.exit_code == 1 and first.key == "Torch.roll.1.forward"
    assert first.scope == "blocks.1 (Block)"  # the second Block the loop called, though both share one stack
    assert first.argument_diffs == ("shifts: 1 → -1",)


def test_a_one_line_forward_names_each_submodule_by_the_order_of_its_calls(tmp_path):
    source = tmp_path / "model.py"
    source.write_text(_SOURCE)
    result = compare_dumps(str(_blocks_dump(tmp_path / "t", source, fc1_scale=2.0)),
                           str(_blocks_dump(tmp_path / "g", source)))
    assert result.exit_code == 1 and result.first_divergence.scope == "blocks.0.mlp.fc1 (Linear)"
    assert [b.split(":")[0] for b in result.built_differently] == ["blocks.0.mlp.fc1 (Linear).weight",
                                                                   "blocks.1.mlp.fc1 (Linear).weight"]


def _tower_dump(root: Path, source: Path, *, reduced: bool = True, fused_eps: float | None = None) -> Path:
    """Tower(x): the norm (eager, or npu_rms_norm with `fused_eps`), up and down (ColumnLinear), then the backward:
    CopyToRegion's all_reduce in down's, then up's backward (only `reduced`), and a backward record."""
    x = torch.linspace(-1, 1, 8).reshape(2, 4)
    weight = torch.ones(4, 4)
    records: dict = {}
    norm = [*_CALL, _frame(source, "return self.down(self.up(self.norm(x)))"), *_CALL, *_STEP]
    stack: dict = {}
    if fused_eps is None:
        records["Tensor.pow.0.forward"] = _record(x, out=x.pow(2), exponent=2)
        records["Tensor.__add__.0.forward"] = _record(x.pow(2).mean(-1, keepdim=True), out=x.pow(2).mean(-1), other=1e-5)
        stack["0"] = [["Tensor.pow.0.forward", "Tensor.__add__.0.forward"],
                      [_frame(source, "return self.weight * (x * torch.rsqrt("), *norm]]
    else:
        records["NPU.npu_rms_norm.0.forward"] = _record(x, torch.ones(4), out=x, epsilon=fused_eps)
        stack["0"] = [["NPU.npu_rms_norm.0.forward"],
                      [_frame(source, "return torch_npu.npu_rms_norm(x, self.weight)[0]"), *norm]]
    records["Functional.linear.0.forward"] = _record(x, weight, out=x @ weight.T)
    records["Functional.linear.1.forward"] = _record(x @ weight.T, weight, out=x @ weight.T @ weight.T)
    stack["1"] = [["Functional.linear.0.forward", "Functional.linear.1.forward"],
                  [_frame(source, "return F.linear(CopyToRegion.apply(x), self.weight)"), *norm]]
    grad = torch.full((2, 4), 2.0)
    keys = [f"Distributed.all_reduce.{n}.forward" for n in range(2 if reduced else 1)]
    for key in keys:
        records[key] = _record(grad / 2, out=grad, grad=False)
    backward = [f"File {_TORCH}/autograd/function.py, line 325, in apply, \n return user_fn(self, *args)",
                f"File {_TORCH}/_tensor.py, line 623, in backward, \n torch.autograd.backward(",
                "File /work/train.py, line 12, in train_step, \n loss.backward()"]
    stack["2"] = [keys, [_frame(source, "dist.all_reduce(grad)", "backward"), *backward]]
    records["Functional.linear.0.backward"] = {"input": [tensor_record(grad if reduced else grad / 2)],
                                               "output": [tensor_record(grad)]}
    write_rank(root / "step0" / "rank0", records, {}, stack, level="L1")
    return root


def test_a_collective_in_a_function_backward_names_the_module_that_applied_it(tmp_path):
    source = tmp_path / "model.py"
    source.write_text(_SOURCE)
    result = compare_dumps(str(_tower_dump(tmp_path / "t", source, reduced=False)),
                           str(_tower_dump(tmp_path / "g", source)))
    assert result.exit_code == 1 and result.first_divergence.key == "Functional.linear.0.backward"
    assert result.first_divergence.scope == "up (ColumnLinear)"
    # autograd runs the backwards in reverse: the second all_reduce is up's, the first applier
    assert result.lost_collectives == ("Distributed.all_reduce.1.forward (in the backward of up (ColumnLinear))",)


def test_a_fused_norm_is_checked_against_the_eager_norm_of_its_module(tmp_path):
    source = tmp_path / "model.py"
    source.write_text(_SOURCE)
    result = compare_dumps(str(_tower_dump(tmp_path / "t", source, fused_eps=1e-6)),
                           str(_tower_dump(tmp_path / "g", source)))
    first = result.first_divergence
    assert result.exit_code == 1 and first.key == "NPU.npu_rms_norm.0.forward" and first.scope == "norm (RMSNorm)"
    assert first.argument_diffs == ("epsilon: 1e-05 (the original adds it before rsqrt) → 1e-06",)
    same = compare_dumps(str(_tower_dump(tmp_path / "s", source, fused_eps=1e-5)), str(_tower_dump(tmp_path / "g", source)))
    assert same.exit_code == 0  # the same epsilon: a warning for the one-sided records, no failure


_TORCH_FILES = {"container.py": "class Sequential:\n    def forward(self, input):\n        for module in self:\n"
                                "            input = module(input)\n        return input\n",
                "linear.py": "class Linear:\n    def forward(self, input):\n        return F.linear(input, self.weight)\n",
                "activation.py": "class GELU:\n    def forward(self, input):\n        return F.gelu(input)\n"}


def _sequential_dump(root: Path, source: Path, modules: Path, last_scale: float = 1.0) -> Path:
    """`self.head(x)`, an nn.Sequential(Linear, GELU, Linear), its frames in (stand-in) torch files."""
    x, weight = torch.linspace(-1, 1, 8).reshape(2, 4), torch.linspace(-0.5, 0.5, 16).reshape(4, 4)
    h = x @ weight.T
    records = {"Functional.linear.0.forward": _record(x, weight, out=h),
               "Functional.gelu.0.forward": _record(h, out=torch.nn.functional.gelu(h)),
               "Functional.linear.1.forward": _record(torch.nn.functional.gelu(h), weight * last_scale,
                                                      out=torch.nn.functional.gelu(h) @ (weight * last_scale).T)}
    outer = [*_CALL, f"File {modules}/container.py, line 4, in forward, \n input = module(input)", *_CALL,
             _frame(source, "return self.head(x)"), *_CALL, *_STEP]
    stack = {"0": [["Functional.linear.0.forward", "Functional.linear.1.forward"],
                   [f"File {modules}/linear.py, line 3, in forward, \n return F.linear(input, self.weight)", *outer]],
             "1": [["Functional.gelu.0.forward"], [f"File {modules}/activation.py, line 3, in forward, \n F.gelu", *outer]]}
    write_rank(root / "step0" / "rank0", records, {}, stack, level="L1")
    return root


def test_an_nn_sequential_names_its_elements_by_their_order(tmp_path):
    source = tmp_path / "model.py"
    source.write_text(_SOURCE + "\n\nclass Head(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
                      "        self.head = nn.Sequential(nn.Linear(4, 4), nn.GELU(), nn.Linear(4, 4))\n\n"
                      "    def forward(self, x):\n        return self.head(x)\n")
    modules = tmp_path / "site-packages" / "torch" / "nn" / "modules"
    modules.mkdir(parents=True)
    for name, text in _TORCH_FILES.items():
        (modules / name).write_text(text)
    result = compare_dumps(str(_sequential_dump(tmp_path / "t", source, modules, last_scale=2.0)),
                           str(_sequential_dump(tmp_path / "g", source, modules)))
    assert result.exit_code == 1 and result.first_divergence.scope == "head.2 (Linear)"
    assert [b.split(":")[0] for b in result.built_differently] == ["head.2 (Linear).weight"]
    container = next(r for r in result.records if r.key == "Functional.gelu.0.forward")
    assert container.scope == "head.1 (GELU)"
