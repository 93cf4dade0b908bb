"""Fusion advice and the performance lint (issue 42): each fixture gets exactly its finding."""

from __future__ import annotations

from pathlib import Path

from migrator import api
from tests.engine.helpers import scan_text

REPO = Path(__file__).resolve().parents[2]

RMS_NORM = '''import torch
from torch import nn
class RMSNorm(nn.Module):
    def forward(self, hidden_states):
        variance = hidden_states.pow(2).mean(-1, keepdim=True)
        hidden_states = hidden_states * torch.rsqrt(variance + self.variance_epsilon)
        return self.weight * hidden_states
'''
SWIGLU = '''import torch.nn.functional as F
from torch import nn
class MLP(nn.Module):
    def forward(self, x):
        gate, up = self.gate_up(x).chunk(2, dim=-1)
        return self.down(F.silu(gate) * up)
'''
ROPE = '''import torch
def rotate_half(x):
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)
def apply_rotary_pos_emb(q, cos, sin):
    return (q * cos) + (rotate_half(q) * sin)
'''
ATTENTION = '''import math
import torch
import torch.nn.functional as F
class Attention(torch.nn.Module):
    def forward(self, q, k, v):
        T = q.size(-2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
        att = att.masked_fill(self.bias[:, :, :T, :T] == 0, float("-inf"))
        att = F.softmax(att, dim=-1)
        att = F.dropout(att, p=0.1)
        return att @ v
'''


def _fusion(result):
    return [(f.code, f.line, f.message) for f in result.findings if f.family == "fusion"]


def test_rms_norm_gets_npu_rms_norm_with_its_eps_and_weight(tmp_path):
    [(code, line, message)] = _fusion(scan_text(tmp_path, RMS_NORM))
    assert (code, line) == ("FUS001", 6)
    assert "torch_npu.npu_rms_norm(hidden_states, self.weight, epsilon=self.variance_epsilon)[0]" in message


def test_swiglu_gets_npu_swiglu_on_the_unsplit_input(tmp_path):
    [(code, line, message)] = _fusion(scan_text(tmp_path, SWIGLU))
    assert (code, line) == ("FUS002", 6)
    assert "torch_npu.npu_swiglu(self.gate_up(x), dim=-1)" in message and "swapping" not in message


def test_swiglu_with_the_gate_second_says_the_halves_swap(tmp_path):
    [(_, _, message)] = _fusion(scan_text(tmp_path, SWIGLU.replace("F.silu(gate) * up", "F.silu(up) * gate")))
    assert "swapping the halves" in message


def test_neox_rope_gets_npu_rotary_mul_half_mode(tmp_path):
    [(code, line, message)] = _fusion(scan_text(tmp_path, ROPE))
    assert (code, line) == ("FUS003", 6)
    assert "torch_npu.npu_rotary_mul(q, cos, sin, rotary_mode='half')" in message


def test_eager_attention_gets_npu_fusion_attention_with_scale_mask_and_keep_prob(tmp_path):
    [(code, line, message)] = _fusion(scan_text(tmp_path, ATTENTION))
    assert (code, line) == ("FUS004", 11)
    assert "scale=1.0 / math.sqrt(k.size(-1))" in message
    assert "atten_mask=self.bias[:, :, :T, :T] == 0" in message  # masked_fill's True = masked out, as atten_mask
    assert "keep_prob=1 - 0.1" in message and "input_layout='BNSD'" in message


def test_additive_mask_and_division_scale(tmp_path):
    code = ATTENTION.replace("* (1.0 / math.sqrt(k.size(-1)))", "/ math.sqrt(64)").replace(
        'att = att.masked_fill(self.bias[:, :, :T, :T] == 0, float("-inf"))', "att = att + mask")
    [(_, _, message)] = _fusion(scan_text(tmp_path, code))
    assert "scale=1 / (math.sqrt(64))" in message and "atten_mask=(mask) < 0" in message


def test_resnet_sample_gets_no_fusion_finding():
    result = api.scan([REPO / "samples" / "resnet"], root=REPO / "samples" / "resnet", use_cache=False)
    assert [f for f in result.findings if f.family == "fusion"] == []


def test_fusion_advice_never_fails_ci(tmp_path):
    assert {f.severity for f in scan_text(tmp_path, ATTENTION + RMS_NORM).findings if f.family == "fusion"} == {"info"}


PERF_PROGRAM = '''import torch
from torch import nn
class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = nn.Sequential(*[nn.BatchNorm1d(8) for _ in range(21)])
    def forward(self, x):
        idx = torch.nonzero(x > 0)
        host = x.cpu()
        return self.layers(x).sum() + torch.arange(3, dtype=torch.float64).sum()
model = nn.SyncBatchNorm.convert_sync_batchnorm(Net())
for step, (x, y) in enumerate(loader):
    loss = model(x)
    loss.backward()
    total = loss.item()
    if step % 100 == 0:
        print(f"step {step} loss {loss.item():.3f}")
'''


def test_perf_program_gets_one_finding_each_at_the_users_line(tmp_path):
    (tmp_path / "launch.sh").write_text("export ASCEND_LAUNCH_BLOCKING=1\ntorchrun train.py\n")
    scan_text(tmp_path, PERF_PROGRAM, name="train.py")
    result = api.scan([tmp_path], root=tmp_path, use_cache=False)
    found = sorted((f.code, f.path, f.line, f.symbol, f.severity) for f in result.findings if f.family == "perf")
    assert found == [
        ("PERF001", "train.py", 8, "nonzero", "warning"),
        ("PERF001", "train.py", 9, ".cpu()", "warning"),
        ("PERF001", "train.py", 15, ".item()", "warning"),
        ("PERF002", "train.py", 17, ".item()", "info"),
        ("PERF003", "train.py", 10, "torch.float64", "warning"),
        ("PERF004", "train.py", 11, "nn.SyncBatchNorm.convert_sync_batchnorm", "info"),
        ("PERF006", "launch.sh", 1, "ASCEND_LAUNCH_BLOCKING=1", "warning"),
    ]


def test_advice_never_sets_the_exit_code_nor_counts_as_a_site_to_migrate(tmp_path):
    """PERF001 is a warning, but speed advice is no CUDA dependency: a CUDA-free program with a per-step
    `.item()` scans clean (exit 0) and shows no site to migrate."""
    from tests.conftest import run_cli

    (tmp_path / "train.py").write_text(PERF_PROGRAM)
    proc = run_cli("scan", str(tmp_path), "--no-cache", "--format", "json")
    doc = __import__("json").loads(proc.stdout)
    assert any(f["code"] == "PERF001" and f["severity"] == "warning" for f in doc["findings"])
    assert proc.returncode == 0, proc.stdout[-2000:]
    assert doc["summary"]["by_fix_kind"]["manual"] == 0
