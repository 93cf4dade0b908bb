"""`zero_grad(set_to_none=True)` on a torch_npu fused optimizer raises on the first step (issue 45): a finding,
fixed to False where the optimizer is built in the same function, manual where it is built elsewhere."""

from __future__ import annotations

from pathlib import Path

from migrator import api

LOOP = """import torch_npu


def train(model, batches):
    optimizer = torch_npu.optim.NpuFusedAdamW(model.parameters(), lr=1e-3)
    for x in batches:
        optimizer.zero_grad(set_to_none=True)
        model(x).sum().backward()
        optimizer.step()
    optimizer.zero_grad()
"""


def test_set_to_none_true_on_an_npu_fused_optimizer_is_fixed_to_false(tmp_path: Path):
    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / "train.py").write_text(LOOP)
    before = [f for f in api.scan([tmp_path], root=tmp_path, use_cache=False).findings if f.code == "APEX014"]
    assert [(f.line, f.fix is not None) for f in before] == [(7, True)]  # the bare zero_grad() is fine
    api.fix([tmp_path], root=tmp_path, target="npu", use_cache=False)
    fixed = (tmp_path / "train.py").read_text()
    assert "optimizer.zero_grad(set_to_none=False)" in fixed and "set_to_none=True" not in fixed
    after = api.scan([tmp_path], root=tmp_path, use_cache=False).findings
    assert not [f for f in after if f.code == "APEX014"]
