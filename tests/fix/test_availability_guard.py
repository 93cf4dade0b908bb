"""An availability check that guards a CUDA-only call is not renamed (issue 39 item 2c): renamed, it is true
on the Ascend host and the guarded `torch.cuda` call, which the fix leaves, is reached there."""

from __future__ import annotations

from pathlib import Path

import pytest

from migrator import api

FLAG = """import torch


class Trainer:
    def __init__(self):
        self.cuda = torch.cuda.is_available()

    def setup(self):
        if self.cuda and torch.cuda.get_device_capability(0)[0] < 7:
            return "old gpu"
        return "ok"
"""

INLINE = """import torch

if torch.cuda.is_available():
    major, _ = torch.cuda.get_device_capability()
"""

UNGUARDED = """import torch

use_cuda = torch.cuda.is_available()
if use_cuda:
    torch.cuda.synchronize()
major = torch.cuda.get_device_capability()
"""


def _fix(tmp_path: Path, source: str, target: str) -> tuple[str, list, list]:
    root = tmp_path / target
    root.mkdir(exist_ok=True)
    (root / "pyproject.toml").write_text("")
    (root / "m.py").write_text(source)
    before = api.scan([root], root=root, use_cache=False)
    api.fix([root], root=root, target=target, use_cache=False)
    after = api.scan([root], root=root, use_cache=False)
    return (root / "m.py").read_text(), before.findings, after.findings


@pytest.mark.parametrize("target", ["npu", "portable"])
@pytest.mark.parametrize(("source", "line"), [(FLAG, 6), (INLINE, 3)])
def test_a_check_guarding_a_manual_cuda_call_is_declined_in_scan_and_fix(tmp_path, target, source, line):
    fixed, before, after = _fix(tmp_path, source, target)
    check = next(f for f in before if f.symbol == "torch.cuda.is_available")
    assert check.line == line and check.fix is None  # manual in scan
    assert "guards `torch.cuda.get_device_capability`, which stays CUDA-only" in check.message
    assert "torch.cuda.is_available()" in fixed  # and left by fix
    again = next(f for f in after if f.symbol == "torch.cuda.is_available")
    assert again.message == check.message  # the record's reason, unchanged though the fix moved lines


def test_a_check_guarding_only_renamed_calls_is_still_fixed(tmp_path):
    fixed, before, _ = _fix(tmp_path, UNGUARDED, "npu")
    check = next(f for f in before if f.symbol == "torch.cuda.is_available")
    assert check.fix is not None
    assert "use_cuda = torch.npu.is_available()" in fixed and "torch.npu.synchronize()" in fixed
