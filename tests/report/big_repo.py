"""A generated repository at the scale of a mid-sized training project (about 228 Python files), for
measuring the report's length: a realistic mix of CUDA usage (`.cuda()`, `torch.cuda.*`, apex,
flash_attn, NCCL, device strings, hand-written RMSNorm and per-step `.item()` that the advice families
flag) next to CUDA-free code, with `tests/` and `examples/` folders. Deterministic: the same tree every run."""

from __future__ import annotations

from pathlib import Path

HEADER = '"""{doc}"""\n\nimport math\nimport os\n\nimport torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n'

MODEL = HEADER + '''

class RMSNorm{i}(nn.Module):
    def __init__(self, dim, eps=1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        variance = x.pow(2).mean(-1, keepdim=True)
        x = x * torch.rsqrt(variance + self.eps)
        return self.weight * x


class Block{i}(nn.Module):
    def __init__(self, dim, heads):
        super().__init__()
        self.norm = RMSNorm{i}(dim)
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)
        self.heads = heads

    def forward(self, x):
        q, k, v = self.qkv(self.norm(x)).chunk(3, dim=-1)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
        att = F.softmax(att, dim=-1)
        return x + self.proj(att @ v)


def build_{i}(dim=256):
    model = Block{i}(dim, 4).cuda()
    torch.cuda.synchronize()
    return model
'''

FLASH = HEADER + '''from flash_attn import flash_attn_func
from flash_attn.layers.rotary import apply_rotary_emb


class Attention{i}(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.wq = nn.Linear(dim, dim)
        self.wk = nn.Linear(dim, dim)
        self.wv = nn.Linear(dim, dim)

    def forward(self, x):
        q, k, v = self.wq(x), self.wk(x), self.wv(x)
        q, k = apply_rotary_emb(q, self.cos, self.sin), apply_rotary_emb(k, self.cos, self.sin)
        return flash_attn_func(q, k, v, causal=True)


def make_mask_{i}(n):
    return torch.ones(n, n, device="cuda").tril()
'''

TRAIN = HEADER + '''import torch.distributed as dist
from apex.optimizers import FusedAdam
from torch.profiler import ProfilerActivity
from torch.utils.data import DataLoader

ACTIVITIES = [ProfilerActivity.CPU, ProfilerActivity.CUDA]


def setup_{i}():
    dist.init_process_group(backend="nccl")
    local_rank = int(os.environ.get("LOCAL_RANK", 0))
    torch.cuda.set_device(local_rank)
    return torch.device("cuda", local_rank)


def train_{i}(model, dataset, steps):
    device = setup_{i}()
    model = model.to(device)
    opt = FusedAdam(model.parameters(), lr=1e-3)
    loader = DataLoader(dataset, batch_size=8)
    losses = []
    for x, y in loader:
        x, y = x.cuda(non_blocking=True), y.cuda(non_blocking=True)
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    print(torch.cuda.max_memory_allocated())
    return losses
'''

AMP = HEADER + '''from apex import amp


def wrap_{i}(model, optimizer):
    model, optimizer = amp.initialize(model, optimizer, opt_level="O1")
    return model, optimizer


def step_{i}(loss, optimizer):
    with amp.scale_loss(loss, optimizer) as scaled:
        scaled.backward()
    torch.cuda.empty_cache()
'''

DIST = HEADER + '''import torch.distributed as dist


def all_reduce_{i}(t):
    if not dist.is_initialized():
        dist.init_process_group(backend="nccl")
    t = t.to("cuda:0")
    dist.all_reduce(t)
    torch.cuda.current_stream().synchronize()
    return t


def memory_{i}():
    return torch.cuda.memory_allocated() / 2**20


def use_bf16_{i}():
    major, _ = torch.cuda.get_device_capability()
    return major >= 8
'''

PLAIN = '''"""{doc}"""

import json
import re
from dataclasses import dataclass


@dataclass
class Config{i}:
    name: str = "run-{i}"
    steps: int = {n}
    lr: float = 3e-4


def load_{i}(path):
    with open(path) as f:
        return Config{i}(**json.load(f))


def slug_{i}(text):
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")
'''

TEST = '''"""{doc}"""

import pytest
import torch


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a GPU")
def test_forward_{i}():
    x = torch.randn(4, 8).cuda()
    assert x.is_cuda
    torch.cuda.synchronize()


def test_cpu_{i}():
    assert torch.zeros(2).sum() == 0
'''

EXAMPLE = HEADER + '''

def main():
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    model = nn.Linear(16, 16).to(device)
    x = torch.randn(2, 16, device=device)
    with torch.cuda.amp.autocast():
        y = model(x)
    print(y.sum().item())


if __name__ == "__main__":
    main()
'''

# (folder, template, how many): with the seven empty `__init__.py`, 228 Python files, about a third CUDA-free
LAYOUT = (
    ("bigproj/models", MODEL, 34),
    ("bigproj/layers", FLASH, 22),
    ("bigproj/training", TRAIN, 18),
    ("bigproj/amp", AMP, 10),
    ("bigproj/distributed", DIST, 16),
    ("bigproj/utils", PLAIN, 40),
    ("bigproj/data", PLAIN, 23),
    ("tests", TEST, 40),
    ("examples", EXAMPLE, 18),
)
N_FILES = sum(n for _, _, n in LAYOUT) + sum(1 for folder, _, _ in LAYOUT if folder.startswith("bigproj"))

LAUNCH = "#!/bin/bash\nexport CUDA_VISIBLE_DEVICES=0,1,2,3\nexport NCCL_DEBUG=INFO\ntorchrun --nproc_per_node=4 -m bigproj.training.train_000\n"


def write_big_repo(root: Path) -> Path:
    """Write the tree under `root` (created) and return it."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "pyproject.toml").write_text('[project]\nname = "bigproj"\n')
    (root / "requirements.txt").write_text("torch\napex\nflash-attn\n")
    (root / "launch.sh").write_text(LAUNCH)
    for folder, template, count in LAYOUT:
        where = root / folder
        where.mkdir(parents=True, exist_ok=True)
        if folder.startswith("bigproj"):
            (where / "__init__.py").touch()
        stem = "test_case" if folder == "tests" else folder.rsplit("/", 1)[-1].rstrip("s")
        for i in range(count):
            doc = f"{folder}/{stem}_{i:03d}: part of the generated report-scale fixture."
            (where / f"{stem}_{i:03d}.py").write_text(template.format(i=f"{i:03d}", n=i, doc=doc))
    return root
