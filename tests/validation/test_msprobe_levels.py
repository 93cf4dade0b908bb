"""What msprobe dumps cannot record, said (issue 37): parameters that differ as built, listed; a buffer read
inside a module whose inputs and parameters match, named from the source; level L0's blind spots, a
warning, and a 2-step L0 dump's step-1 parameters judged one optimizer update later. Tiny hand-written
dumps in msprobe 26's layout."""

from __future__ import annotations

from pathlib import Path

import torch

from migrator.reporters.msprobe_text import comparison_text
from migrator.validation.parent.interop.msprobe_compare import compare_dumps
from tests.validation.msprobe_kit import tensor_record, write_rank

_SOURCE = '''import torch
import torch_npu
from torch import nn


class Attention(nn.Module):
    def __init__(self):
        super().__init__()
        self.table = nn.Parameter(torch.zeros(9, 2))
        self.register_buffer("index", torch.arange(16))
        self.proj = nn.Linear(4, 4)

    def forward(self, x):
        bias = torch_npu.npu_fast_gelu(self.table[self.index])
        return self.proj(x + bias.sum())
'''


def _stats(t: torch.Tensor, name: str, folder: Path | None, grad: bool = True) -> dict:
    return tensor_record(t, name, folder, grad)


def _write(folder: Path, records: dict, construct: dict, stack: dict | None = None, *, level: str = "mix",
           task: str = "statistics") -> None:
    write_rank(folder, records, construct, stack, level=level, task=task)


def _attention(root: Path, source: Path, out_norm: float, proj_top: float = 1.0, level: str = "mix") -> Path:
    """Attention (table parameter, index buffer) then its proj Linear: `out_norm` is the proj's input (what
    the non-dumped indexing made), `proj_top` scales the proj's weight (an init slip)."""
    x, table = torch.ones(2, 4), torch.linspace(-1, 1, 18).reshape(9, 2)
    weight = torch.linspace(-proj_top, proj_top, 16).reshape(4, 4)
    h = torch.full((2, 4), out_norm)
    out = h @ weight.T
    records = {"Functional.linear.0.forward": {"input_args": [_stats(h, "", None), _stats(weight, "", None)],
                                               "input_kwargs": {}, "output": [_stats(out, "", None)]},
               "Module.attn.proj.Linear.forward.0": {"input_args": [_stats(h, "", None)], "input_kwargs": {},
                                                     "output": [_stats(out, "", None)],
                                                     "parameters": {"weight": _stats(weight, "", None)}},
               "Module.attn.Attention.forward.0": {"input_args": [_stats(x, "", None)], "input_kwargs": {},
                                                   "output": [_stats(out, "", None)],
                                                   "parameters": {"table": _stats(table, "", None)}}}
    construct = {"Functional.linear.0.forward": "Module.attn.proj.Linear.forward.0",
                 "Module.attn.proj.Linear.forward.0": "Module.attn.Attention.forward.0",
                 "Module.attn.Attention.forward.0": None}
    stack = {"0": [["Module.attn.proj.Linear.forward.0"],
                   [f"File {source}, line 15, in forward, \n return self.proj(x + bias.sum())"]]}
    if level == "L0":
        records.pop("Functional.linear.0.forward")
    _write(root / "step0" / "rank0", records, construct, stack, level=level)
    return root


def test_a_buffer_read_inside_a_module_whose_inputs_and_parameters_match_is_named(tmp_path):
    source = tmp_path / "model.py"
    source.write_text(_SOURCE)
    golden = _attention(tmp_path / "g", source, 1.0)
    assert compare_dumps(str(_attention(tmp_path / "same", source, 1.0)), str(golden)).exit_code == 0

    result = compare_dumps(str(_attention(tmp_path / "t", source, 1.5)), str(golden))
    assert result.exit_code == 1 and result.first_divergence.key == "Functional.linear.0.forward"
    assert result.unrecorded.startswith("attn (Attention): inputs and parameters as the original's")
    assert "buffer(s) its forward reads: index (register_buffer in model.py)" in result.unrecorded
    assert result.built_differently == ()
    assert "  attn (Attention): inputs and parameters as the original's" in comparison_text(result)
    assert "torch_npu" not in result.unrecorded  # at mix, a fused op is a record of its own

    level_l0 = compare_dumps(str(_attention(tmp_path / "t0", source, 1.5, level="L0")),
                             str(_attention(tmp_path / "g0", source, 1.0, level="L0")))
    assert "index" in level_l0.unrecorded
    assert "fused op(s) it calls, which level L0 does not record: torch_npu.npu_fast_gelu" in level_l0.unrecorded

    source.unlink()  # the dump read elsewhere: the module still, its buffers not
    moved = compare_dumps(str(_attention(tmp_path / "t", source, 1.5)), str(golden))
    assert moved.unrecorded.startswith("attn (Attention)") and "buffer(s) its forward reads" not in moved.unrecorded


def test_parameters_that_differ_as_built_are_all_listed_and_no_buffer_is_blamed(tmp_path):
    source = tmp_path / "model.py"
    source.write_text(_SOURCE)
    golden = _attention(tmp_path / "g", source, 1.0)
    result = compare_dumps(str(_attention(tmp_path / "t", source, 1.0, proj_top=2.0)), str(golden))
    assert result.exit_code == 1
    assert len(result.built_differently) == 1
    assert result.built_differently[0].startswith("attn.proj (Linear).weight: Norm ")
    assert result.built_differently[0].endswith("(2x)")
    assert result.unrecorded == ""  # a parameter differs: the module's inputs-and-parameters test does not hold
    assert "  parameters that differ as built: attn.proj (Linear).weight: Norm " in comparison_text(result)


def test_level_l0_never_passes_plainly_and_says_what_it_cannot_see(tmp_path):
    source = tmp_path / "model.py"
    source.write_text(_SOURCE)
    same = compare_dumps(str(_attention(tmp_path / "t", source, 1.0, level="L0")),
                         str(_attention(tmp_path / "g", source, 1.0, level="L0")))
    assert same.status == "warn" and same.exit_code == 0
    blind = next(n for n in same.notes if n.startswith("level L0"))
    assert "EMA" in blind and "dump steps [0, 1]" in blind

    mix = compare_dumps(str(_attention(tmp_path / "tm", source, 1.0)), str(_attention(tmp_path / "gm", source, 1.0)))
    assert mix.status == "pass" and not any(n.startswith("level L0") for n in mix.notes)


def _two_steps(root: Path, step1_weight: torch.Tensor, before: torch.Tensor) -> Path:
    """An L0 tensor dump of two steps of one Linear: step 0 holds `before`, step 1 `step1_weight`."""
    for step, weight in ((0, before), (1, step1_weight)):
        folder = root / f"step{step}" / "rank0"
        (folder / "dump_tensor_data").mkdir(parents=True)
        x = torch.ones(1, 16)
        record = {"input_args": [_stats(x, "in", folder, False)], "input_kwargs": {},
                  "output": [_stats(x @ weight.T, "out", folder)],
                  "parameters": {"weight": _stats(weight, "w", folder)}}
        _write(folder, {"Module.fc.Linear.forward.0": record}, {"Module.fc.Linear.forward.0": None},
               level="L0", task="tensor")
    return root


def test_a_two_step_l0_dump_judges_step_1_parameters_against_the_update_and_names_a_decay(tmp_path):
    torch.manual_seed(0)
    lr, wd = 1e-3, 0.05
    before = torch.randn(8, 16) * 0.02
    before[0] = 1e-6  # a row near zero: its update is large against its value
    golden_after = before - lr * torch.sign(torch.randn(8, 16))
    golden = _two_steps(tmp_path / "g", golden_after, before)

    noisy = golden_after + 2e-8 * torch.randn(8, 16)  # fp32 noise in the update, far under one update
    correct = compare_dumps(str(_two_steps(tmp_path / "ok", noisy, before)), str(golden))
    assert correct.exit_code == 0, correct.first_divergence
    blind = next(n for n in correct.notes if n.startswith("level L0"))
    assert "the optimizer through the parameters of steps after the first" in blind

    decayed = compare_dumps(str(_two_steps(tmp_path / "wd", golden_after - lr * wd * before, before)), str(golden))
    first = decayed.first_divergence
    assert decayed.exit_code == 1 and first.label == "step1/rank0" and first.worst.slot == "parameters.weight"
    assert first.worst.metric == "update_rel_l2"
    assert "a weight_decay (lr × weight_decay = 5e-05) the port's optimizer applies" in first.worst.detail
    assert "the optimizer's update of it differs" in first.worst.detail


def _window_attention(root: Path, keep_mask: bool, task: str) -> Path:
    """The original adds a -100 mask in the attention module; the port passes npu_fusion_attention a bool
    atten_mask built from it by `!= 0` (True = masked out), or by `== 0` (a keep-mask: inverted)."""
    folder = root / "step0" / "rank0"
    (folder / "dump_tensor_data").mkdir(parents=True)
    data = folder if task == "tensor" else None
    additive = torch.zeros(4, 4, 4)
    additive[:, :, :1] = -100.0
    scope = "Module.attn.WindowAttention.forward.0"
    records: dict = {}
    if root.name == "g":
        scores = torch.ones(2, 4, 4, 4)
        records["Tensor.__add__.0.forward"] = {"input_args": [_stats(scores, "s", data), _stats(additive, "m", data, False)],
                                               "input_kwargs": {}, "output": [_stats(scores + additive, "o", data)]}
    else:
        bool_mask = (additive == 0) if keep_mask else (additive != 0)
        compare = "Tensor.__eq__.0.forward" if keep_mask else "Tensor.__ne__.0.forward"
        records[compare] = {"input_args": [_stats(additive, "m", data, False), {"type": "int", "value": 0}],
                            "input_kwargs": {}, "output": [{"type": "torch.Tensor", "dtype": "torch.bool",
                                                            "shape": [4, 4, 4], "Max": True, "Min": False,
                                                            "Mean": None, "Norm": None, "requires_grad": False}]}
        mask_node = {"type": "torch.Tensor", "dtype": "torch.bool", "shape": [4, 1, 4, 4], "Max": True, "Min": False,
                     "Mean": None, "Norm": None, "requires_grad": False}
        if data is not None:
            torch.save(bool_mask.unsqueeze(1), folder / "dump_tensor_data" / "am.pt")
            mask_node["data_name"] = "am.pt"
        q = torch.ones(4, 2, 4, 8)
        records["NPU.npu_fusion_attention.0.forward"] = {
            "input_args": [_stats(q, "q", data), _stats(q, "k", data), _stats(q, "v", data), {"type": "int", "value": 2}],
            "input_kwargs": {"atten_mask": mask_node}, "output": [_stats(q, "out", data)]}
    _write(folder, records, {key: scope for key in records} | {scope: None}, task=task)
    return root


def test_an_atten_mask_that_keeps_what_the_original_masks_fails_as_inverted(tmp_path):
    for task in ("tensor", "statistics"):
        golden = _window_attention(tmp_path / task / "g", False, task)
        correct = compare_dumps(str(_window_attention(tmp_path / task / "ok", False, task)), str(golden))
        assert correct.exit_code == 0, (task, correct.first_divergence)
        inverted = compare_dumps(str(_window_attention(tmp_path / task / "inv", True, task)), str(golden))
        first = inverted.first_divergence
        assert inverted.exit_code == 1 and first.key == "NPU.npu_fusion_attention.0.forward", task
        assert first.scope == "attn (WindowAttention)"
        assert "inverted, a keep-mask (npu_fusion_attention masks where True)" in first.argument_diffs[0], task
        if task == "tensor":
            assert first.argument_diffs[0].startswith("atten_mask: the port masks out 75.0% of positions, "
                                                      "the original's additive mask 25.0%")
