"""Reproducers of the false findings and misses the real-repository review found (issue 42 acceptance 3,
`bench/perf_lint_review.py`): each the smallest form of the package's code."""

from __future__ import annotations

from migrator import api
from tests.engine.helpers import scan_text

# lightning-bolts 0.7.0 pl_bolts/models/rl/dqn_model.py: the dataset steps the environment with the agent
RL_LOADER = '''from torch.utils.data import DataLoader
class DQN:
    def train_batch(self):
        yield self.agent(self.env)
    def _dataloader(self):
        self.dataset = ExperienceSourceDataset(self.train_batch)
        return DataLoader(dataset=self.dataset, batch_size=self.batch_size)
    def val_dataloader(self):
        return DataLoader(ExperienceSourceDataset(self.train_batch))
    def test_dataloader(self):
        return DataLoader(ImageFolder(self.data_dir), batch_size=4)
'''


def _dataloaders(result):
    return [(f.line, f.message.split(":")[0]) for f in result.findings if f.code == "PERF005"]


def test_a_dataset_made_from_the_objects_own_method_is_asked_for_pin_memory_only(tmp_path):
    """Worker processes would step copies of the environment and agent; `self.data_dir` is no method."""
    assert _dataloaders(scan_text(tmp_path, RL_LOADER)) == [
        (7, "`DataLoader` without pin_memory=True"),
        (9, "`DataLoader` without pin_memory=True"),
        (11, "`DataLoader` without num_workers > 0 and pin_memory=True"),
    ]


TRAINING_LOOP = '''import torch
for x in loader:
    loss = model(x)
    loss.backward()
    assert loss.item() > 0
'''


def test_advice_is_not_reported_in_test_files(tmp_path):
    """litgpt 0.5.13 tests/test_distributed.py: a unit test's per-iteration `.item()` is not a training run;
    the same loop in the project's own module is."""
    for name in ("tests/test_loop.py", "pkg/test_loop.py", "train.py"):
        scan_text(tmp_path, TRAINING_LOOP, name=name)
    result = api.scan([tmp_path], root=tmp_path, use_cache=False)
    assert [(f.code, f.path) for f in result.findings if f.family == "perf"] == [("PERF001", "train.py")]


def test_rms_norm_with_torch_mean_of_a_product(tmp_path):
    """litgpt 0.5.13 litgpt/model.py RMSNorm: `torch.mean(x * x, ...)`, the weight applied afterwards."""
    code = '''import torch
class RMSNorm(torch.nn.Module):
    def forward(self, x):
        norm_x = torch.mean(x * x, dim=self.dim, keepdim=True)
        x_normed = x * torch.rsqrt(norm_x + self.eps)
        return x_normed * self.weight
'''
    [finding] = [f for f in scan_text(tmp_path, code).findings if f.family == "fusion"]
    assert (finding.code, finding.line) == ("FUS001", 5)
    assert "torch_npu.npu_rms_norm(x, self.weight, epsilon=self.eps)[0]" in finding.message


def test_rms_norm_weight_is_the_factor_beside_the_rsqrt(tmp_path):
    """k-diffusion 0.1.1.post1 image_transformer_v1.py: `scale * torch.rsqrt(...)`, then `x * scale`."""
    code = '''import torch
def rms_norm(x, scale, eps):
    mean_sq = torch.mean(x**2, dim=-1, keepdim=True)
    scale = scale * torch.rsqrt(mean_sq + eps)
    return x * scale
'''
    [finding] = [f for f in scan_text(tmp_path, code).findings if f.family == "fusion"]
    assert "torch_npu.npu_rms_norm(x, scale, epsilon=eps)[0]" in finding.message


def test_a_mean_that_is_no_square_is_no_rms_norm(tmp_path):
    code = '''import torch
def norm(x, eps):
    return x * torch.rsqrt(torch.mean(x, dim=-1, keepdim=True) + eps)
'''
    assert [f for f in scan_text(tmp_path, code).findings if f.family == "fusion"] == []
