"""Script mode takes the branches the hardware would (issue 45): a nanoGPT-style script picks autocast only
when its device is an accelerator. With its own default device both sides enter autocast (CUDA on the
original, the NPU on the port, both emulated on the CPU), so a bf16 -> fp16 port fails naming the dtype;
when the program is told to use the CPU, the verdict says its precision path was never compared."""

from __future__ import annotations

from pathlib import Path

import pytest

PROGRAM = Path(__file__).parent / "programs" / "nanogpt_device_train.py"


def _trees(tmp_path: Path, dtype: str = "bfloat16") -> tuple[Path, Path]:
    original, port = tmp_path / "orig", tmp_path / "port"
    original.mkdir()
    port.mkdir()
    text = PROGRAM.read_text()
    (original / "train.py").write_text(text)
    (port / "train.py").write_text(
        text.replace("import torch\n", "import torch\nimport torch_npu  # noqa: F401\n", 1)
        .replace('default="cuda"', 'default="npu"')
        .replace('device_type = "cuda" if "cuda" in device else "cpu"', 'device_type = "npu" if "npu" in device else "cpu"')
        .replace("torch.cuda.amp.GradScaler", "torch.npu.amp.GradScaler")
        .replace('default="bfloat16"', f'default="{dtype}"'))
    return original, port


@pytest.mark.slow
@pytest.mark.parametrize("dtype, status", [("bfloat16", "pass"), ("float16", "fail")])
def test_the_script_enters_autocast_on_both_sides_and_a_dtype_slip_fails(tmp_path, dtype, status):
    pytest.importorskip("torch")
    from migrator import api

    original, port = _trees(tmp_path, dtype)
    result = api.validate(original, migrated=str(port), script="train.py", curve_steps=3, stages=["S1"])
    s1 = result.stage("S1")
    policy = next(c for c in s1.checks if c["check"].startswith("precision policy"))
    if status == "pass":
        assert result.exit_code == 0 and s1.status == "pass", result.text()
        assert "autocast bfloat16 at 4/4 module forwards" in policy["message"], policy
    else:
        assert s1.status == "fail" and "autocast dtype float16 (migrated) vs bfloat16 (original)" in policy["message"]
    assert not any(c["check"].startswith("accelerator path") for c in s1.checks)


@pytest.mark.slow
def test_a_program_told_to_use_the_cpu_is_not_a_silent_pass(tmp_path):
    pytest.importorskip("torch")
    from migrator import api

    original, port = _trees(tmp_path)
    result = api.validate(original, migrated=str(port), script="train.py", script_args=("--device=cpu",),
                          curve_steps=3, stages=["S1"])
    s1 = result.stage("S1")
    row = next(c for c in s1.checks if c["check"].startswith("accelerator path"))
    assert row["status"] == "warn" and "the program chose its CPU path" in row["message"]
    assert s1.status == "warn", result.text()
