"""Fused optimizers on Ascend (issue 39 item 7): which optimizer `migrate fix` chooses, with Apex's
argument semantics carried over, and where it declines.

Facts (`../shared/docs/ascend-facts.md` §d; the coverage table): `aten::_fused_adamw_` and
`aten::_fused_adam_` have NPU kernels, and `torch.optim.AdamW(fused=True)` does not take GradScaler's
grad_scale/found_inf, so `fused=True` is written only where the module does no loss scaling (torch
then picks its default `foreach` path). Apex FusedAdam's defaults: `adam_w_mode=True` (decoupled,
AdamW), weight_decay 0.0 (AdamW's is 0.01), `bias_correction=True`, `amsgrad` refused by Apex.
torch_npu's `NpuFusedAdamW` is not chosen: it refuses bf16 parameters and `zero_grad(set_to_none=True)`.
"""

from __future__ import annotations

import ast
import textwrap

import pytest

from migrator import api
from migrator.catalogue.coverage import lookup
from tests.engine.helpers import scan_text
from tests.rules.examples import fix_example

AW_DEFAULTS = "betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0"


def _fix(tmp_path, code: str):
    return fix_example(tmp_path, textwrap.dedent(code), "train.py", "npu")


def test_the_fused_kernels_the_choice_relies_on_are_in_the_table():
    assert lookup("aten::_fused_adamw_").kernel == "npu_kernel"
    assert lookup("aten::_fused_adam_").kernel == "npu_kernel"
    assert any("grad_scale/found_inf" in limit for limit in lookup("torch.optim.AdamW").limits)


@pytest.mark.parametrize("before, after", [
    # adam_w_mode=True (Apex's default): decoupled weight decay -> AdamW, Apex's weight_decay=0.0 kept
    ("opt = FusedAdam(model.parameters(), lr=3e-4)",
     f"opt = torch.optim.AdamW(model.parameters(), lr=3e-4, {AW_DEFAULTS}, fused=True)"),
    # adam_w_mode=False: L2 weight decay added to the gradient -> torch.optim.Adam
    ("opt = FusedAdam(params, lr=1e-4, adam_w_mode=False, weight_decay=0.01)",
     "opt = torch.optim.Adam(params, lr=1e-4, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01, fused=True)"),
    # the only values torch honours are dropped; set_grad_none is zero_grad's business, not the update's
    ("opt = FusedAdam(params, bias_correction=True, amsgrad=False, set_grad_none=True, betas=(0.9, 0.95))",
     "opt = torch.optim.AdamW(params, lr=1e-3, betas=(0.9, 0.95), eps=1e-8, weight_decay=0.0, fused=True)"),
    # Apex's zero_grad() with set_grad_none=False calls Optimizer.zero_grad(), whose set_to_none is True
    # since torch 2.0: grads become None either way, as torch.optim's own zero_grad() does
    ("opt = FusedAdam(params, lr=1e-3, set_grad_none=False)",
     f"opt = torch.optim.AdamW(params, lr=1e-3, {AW_DEFAULTS}, fused=True)"),
    # positional arguments in Apex's order (bias_correction third) become keywords
    ("opt = FusedAdam(params, 2e-4, True, (0.8, 0.9), 1e-6)",
     "opt = torch.optim.AdamW(params, lr=2e-4, betas=(0.8, 0.9), eps=1e-6, weight_decay=0.0, fused=True)"),
])
def test_apex_fused_adam_becomes_the_torch_optimizer_with_the_same_update(tmp_path, before, after):
    code = f"from apex.optimizers import FusedAdam\n{before}\n"
    fixed, _ = _fix(tmp_path, code)
    ast.parse(fixed)
    assert after in fixed.splitlines() and "FusedAdam" not in fixed
    again, outcome = _fix(tmp_path, fixed)
    assert again == fixed and not [e for c in outcome.plan.changes for e in c.edits]


def test_with_loss_scaling_the_fused_kernel_is_not_chosen(tmp_path):
    fixed, _ = _fix(tmp_path, """
        import torch
        from apex.optimizers import FusedAdam
        scaler = torch.cuda.amp.GradScaler()
        opt = FusedAdam(params, lr=1e-3)
    """)
    ast.parse(fixed)
    line = next(x for x in fixed.splitlines() if x.startswith("opt = "))
    assert line == f"opt = torch.optim.AdamW(params, lr=1e-3, {AW_DEFAULTS})"  # foreach by torch's default


@pytest.mark.parametrize("argument, reason", [
    ("amsgrad=True", "FusedAdam(amsgrad=...) has no equivalent with the same semantics"),
    ("capturable=True", "FusedAdam(capturable=...) has no equivalent with the same semantics"),
    ("master_weights=True", "FusedAdam(master_weights=...) has no equivalent with the same semantics"),
    ("bias_correction=False", "FusedAdam(bias_correction=...) has no equivalent with the same semantics"),
    ("adam_w_mode=cfg.decoupled", "adam_w_mode is not a literal: AdamW (decoupled) or Adam (L2) must be chosen by hand"),
])
def test_arguments_torch_cannot_honour_are_declined_with_the_reason(tmp_path, argument, reason):
    code = f"from apex.optimizers import FusedAdam\nopt = FusedAdam(params, {argument})\n"
    scanned = scan_text(tmp_path / "scan", code)
    (finding,) = [f for f in scanned.findings if f.code == "APEX010" and f.line == 2]
    assert finding.fix is None and finding.declined == reason
    fixed, outcome = _fix(tmp_path / "fix", code)
    assert fixed == code
    declined = {(f.line, why) for c in outcome.plan.changes for f, why in c.declined if f.code == "APEX010"}
    assert declined == {(2, reason), (1, "the import stays while the name is still used")}


def test_fused_lamb_is_left_manual_with_the_reason(tmp_path):
    """NpuFusedLamb has no bias correction, weight_decay 0 and no global clipping; torch has no LAMB."""
    code = "from apex.optimizers import FusedLAMB\nopt = FusedLAMB(params, lr=1e-3)\n"
    (finding,) = [f for f in scan_text(tmp_path / "scan", code).findings if f.code == "APEX011" and f.line == 2]
    assert finding.fix is None and "no bias correction" in finding.message
    fixed, _ = _fix(tmp_path / "fix", code)
    assert fixed == code


def test_deepspeed_fused_and_cpu_adam_are_kept(tmp_path):
    """DeepSpeed's NPU accelerator builds FusedAdam (on torch_npu.npu_apply_adam_w) and CPUAdam: the
    route covers both, and the fix leaves them as they are."""
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "t"\ndependencies = ["deepspeed==0.16.4"]\n')
    code = textwrap.dedent("""
        import deepspeed
        from deepspeed.ops.adam import DeepSpeedCPUAdam, FusedAdam
        gpu_opt = FusedAdam(params, lr=1e-3)
        cpu_opt = DeepSpeedCPUAdam(params, lr=1e-3)
    """)
    (tmp_path / "train.py").write_text(code)
    result = api.scan([tmp_path], root=tmp_path, use_cache=False)
    adam = [f for f in result.findings if f.symbol.startswith("deepspeed.ops.adam.")]
    assert {f.symbol for f in adam} == {"deepspeed.ops.adam.FusedAdam", "deepspeed.ops.adam.DeepSpeedCPUAdam"}
    assert all(f.route is not None and f.route.status == "covered" for f in adam)
    api.fix([tmp_path / "train.py"], root=tmp_path, target="npu", use_cache=False)
    fixed = (tmp_path / "train.py").read_text()
    assert "FusedAdam(params, lr=1e-3)" in fixed and "DeepSpeedCPUAdam(params, lr=1e-3)" in fixed
