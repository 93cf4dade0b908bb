"""The static additions to the perf lint (issue 42 item 3 c, d): tensor prints in the hot path and the
environment settings the advisor's rules flag, in launch scripts and Python."""

from __future__ import annotations

from tests.engine.helpers import scan_text


def _perf(result):
    return sorted((f.code, f.line, f.symbol) for f in result.findings if f.family == "perf")


def test_a_printed_tensor_is_flagged_and_a_printed_host_value_is_not(tmp_path):
    code = '''import torch
for step in range(10):
    x = torch.randn(4)
    loss = model(x)
    loss.backward()
    n = len(x)
    print(step, n, x.shape)
    print(f"loss {loss}")
    if step % 10 == 0:
        print(loss)
'''
    assert _perf(scan_text(tmp_path, code)) == [("PERF002", 10, "print"), ("PERF007", 8, "print")]


def test_a_printed_value_of_a_plain_function_is_no_tensor_unless_used_as_one(tmp_path):
    """`lr = get_lr(step)` printed on every step is a float (samples/gpt); `loss = criterion(...)` with a
    `.backward()` is a tensor."""
    code = '''import torch
for step in range(10):
    lr = get_lr(step)
    acc = (out.argmax(1) == y).float().mean().item() * 100
    loss = criterion(model(x), y)
    loss.backward()
    print(f"lr {lr} acc {acc}")
    print(loss)
'''
    assert _perf(scan_text(tmp_path, code)) == [("PERF001", 4, ".item()"), ("PERF007", 8, "print")]


def test_a_print_in_forward_of_its_argument(tmp_path):
    code = '''import torch
class M(torch.nn.Module):
    def forward(self, hidden, verbose=False):
        out = self.proj(hidden)
        print("out", out)
        return out
'''
    assert _perf(scan_text(tmp_path, code)) == [("PERF007", 5, "print")]


def test_environment_settings_in_python(tmp_path):
    code = '''import os
os.environ.setdefault("TASK_QUEUE_ENABLE", "0")
os.environ["HCCL_ALGO"] = "level0:NA;level1:ring"
os.environ["ASCEND_GLOBAL_LOG_LEVEL"] = "3"
os.environ["TASK_QUEUE_ENABLE"] = "2"
os.putenv("ASCEND_GLOBAL_LOG_LEVEL", 1)
'''
    assert [(c, n) for c, n, _ in _perf(scan_text(tmp_path, code))] == [("PERF008", 6), ("PERF009", 2), ("PERF010", 3)]


def test_environment_settings_in_a_launch_script(tmp_path):
    code = '''#!/bin/bash
export ASCEND_GLOBAL_LOG_LEVEL=0 ASCEND_SLOG_PRINT_TO_STDOUT=1
# export TASK_QUEUE_ENABLE=0
TASK_QUEUE_ENABLE='0' ASCEND_LAUNCH_BLOCKING="1" torchrun train.py
export ASCEND_GLOBAL_LOG_LEVEL=3 TASK_QUEUE_ENABLE=2
'''
    found = _perf(scan_text(tmp_path, code, name="run.sh"))
    assert found == [("PERF006", 4, "ASCEND_LAUNCH_BLOCKING=1"), ("PERF008", 2, "ASCEND_GLOBAL_LOG_LEVEL=0"),
                     ("PERF009", 4, "TASK_QUEUE_ENABLE=0")]
