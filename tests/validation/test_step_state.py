"""State the training step updates besides the trained parameters is graded like the parameter updates
(issue 37 item 3): an EMA of the weights whose decay the port changed (0.9999 → 0.999) passed before."""

from __future__ import annotations

from pathlib import Path

import pytest

PROTOCOL = '''
import torch
import torch.nn.functional as F

EMA_DECAY = {decay}


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(8, 16)
        self.norm = torch.nn.BatchNorm1d(16)
        self.fc2 = torch.nn.Linear(16, 4)
        # the EMA shadow of fc2's weight, kept as a buffer and updated by the training step
        self.register_buffer("ema_fc2", self.fc2.weight.detach().clone())

    def forward(self, x):
        return self.fc2(torch.relu(self.norm(self.fc1(x))))


def make_model(dropout=0.0):
    return Net()


def make_batch(step):
    g = torch.Generator().manual_seed(step)
    return {{"x": torch.randn(16, 8, generator=g), "y": torch.randint(0, 4, (16,), generator=g)}}


INPUT_KEYS = ("x",)


def loss_fn(out, batch):
    return F.cross_entropy(out.float(), batch["y"])


def make_optimizer(model):
    return torch.optim.AdamW(model.parameters(), lr=1e-2)


def train_step(model, optimizer, loss, scaler):
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()
    with torch.no_grad():
        model.ema_fc2.mul_(EMA_DECAY).add_(model.fc2.weight.float(), alpha=1 - EMA_DECAY)
'''


def _tree(root: Path, decay: str) -> Path:
    root.mkdir()
    (root / "validate.py").write_text(PROTOCOL.format(decay=decay))
    return root


@pytest.mark.slow
@pytest.mark.parametrize("decay, status", [("0.9999", "pass"), ("0.999", "fail")])
def test_an_ema_decay_slip_fails_naming_the_buffer(tmp_path, decay, status):
    pytest.importorskip("torch")
    from migrator import api

    original = _tree(tmp_path / "orig", "0.9999")
    migrated = _tree(tmp_path / "port", decay)
    result = api.validate(original, migrated=str(migrated), stages=["S1"])
    s1 = result.stage("S1")
    if status == "fail":
        assert s1.status == "fail" and "ema_fc2" in (s1.reason or ""), result.text()
    else:  # the running statistics and the EMA are graded too, and a correct port passes them
        assert result.exit_code == 0 and s1.status in ("pass", "warn"), result.text()


LAYERSCALE = '''
import torch
import torch.nn.functional as F


class LayerScale(torch.nn.Module):  # timm's
    def __init__(self, dim, init_values=1e-5):
        super().__init__()
        self.gamma = torch.nn.Parameter({gamma})

    def forward(self, x):
        return x * self.gamma


class Block(torch.nn.Module):
    def __init__(self, dim=16):
        super().__init__()
        {layers}
        self.ls = LayerScale(dim, init_values=0.1)

    def forward(self, x):
        return x + self.ls(self.fc2(torch.relu(self.fc1(x))))


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.block = Block()
        self.head = torch.nn.Linear(16, 4)

    def forward(self, x):
        return self.head(self.block(x))


def make_model(dropout=0.0):
    return Net()


def make_batch(step):
    g = torch.Generator().manual_seed(step)
    return {{"x": torch.randn(8, 16, generator=g), "y": torch.randint(0, 4, (8,), generator=g)}}


INPUT_KEYS = ("x",)


def loss_fn(out, batch):
    return F.cross_entropy(out.float(), batch["y"])
'''
ORIGINAL_INIT = "init_values * torch.ones(dim)"
FC1_FIRST = "self.fc1 = torch.nn.Linear(dim, 64)\n        self.fc2 = torch.nn.Linear(64, dim)"
FC2_FIRST = "self.fc2 = torch.nn.Linear(64, dim)\n        self.fc1 = torch.nn.Linear(dim, 64)"


@pytest.mark.slow
@pytest.mark.parametrize("gamma, layers, status", [
    (ORIGINAL_INIT, FC2_FIRST, "pass"),  # a refactor: other draws in another order, the same distributions
    ("torch.ones(dim)", FC1_FIRST, "fail"),  # the port ignores init_values
])
def test_a_port_that_builds_its_model_differently_fails_naming_the_attribute(tmp_path, gamma, layers, status):
    pytest.importorskip("torch")
    from migrator import api

    for name, g, lay in (("orig", ORIGINAL_INIT, FC1_FIRST), ("port", gamma, layers)):
        (tmp_path / name).mkdir()
        (tmp_path / name / "validate.py").write_text(LAYERSCALE.format(gamma=g, layers=lay))
    result = api.validate(tmp_path / "orig", migrated=str(tmp_path / "port"), stages=["S1"])
    s1 = result.stage("S1")
    row = next(c for c in s1.checks if c["check"].startswith("state as built"))
    assert row["status"] == status, result.text()
    if status == "fail":
        assert s1.status == "fail" and result.exit_code == 1
        assert "block.ls (LayerScale).gamma: all 0.1 vs all 1" in row["message"], row["message"]
    else:
        assert result.exit_code == 0, result.text()
