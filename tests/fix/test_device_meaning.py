"""Portable fixes keep their meaning on a CPU-only host, and names a user may type are not device selections:
one test per shape (Literal, annotations, sets/tuples/lists of accepted names)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from migrator import api


def _fix(tmp_path: Path, source: str, target: str = "portable") -> tuple[str, list]:
    root = tmp_path / target
    root.mkdir(exist_ok=True)
    (root / "pyproject.toml").write_text("")
    (root / "m.py").write_text(source)
    before = api.scan([root], root=root, use_cache=False)
    api.fix([root], root=root, target=target, use_cache=False)
    return (root / "m.py").read_text(), [f for f in before.findings if f.path == "m.py"]


GUARD = """import torch


def path_taken(x):
    if x.device.type == "cuda":
        return "accelerator"
    if x.device.type != "cuda":
        return "cpu"
    return "none"
"""


def test_portable_device_type_guard_keeps_a_cpu_tensor_on_the_cpu_branch(tmp_path, monkeypatch):
    torch = pytest.importorskip("torch")
    fixed, _ = _fix(tmp_path, GUARD)
    assert 'x.device.type == _migrate_accelerator_type()' in fixed and "_migrate_device().type" not in fixed
    monkeypatch.syspath_prepend(str(tmp_path / "portable"))
    sys.modules.pop("_migrate_runtime", None)
    original, migrated = {}, {}
    try:
        exec(compile(GUARD, "original", "exec"), original)
        exec(compile(fixed, "migrated", "exec"), migrated)
    finally:
        sys.modules.pop("_migrate_runtime", None)  # the next tests' fixes must not see this tree's copy
    x = torch.ones(1)
    assert not torch.accelerator.is_available()  # this host: CPU only
    assert original["path_taken"](x) == migrated["path_taken"](x) == "cpu"
    assert migrated["_migrate_accelerator_type"]() is None


IS_CUDA = """import torch


def on_accelerator(x):
    return x.is_cuda
"""


def test_portable_is_cuda_stays_false_on_meta_and_cpu_tensors(tmp_path, monkeypatch):
    """issue 39: `!= "cpu"` made a meta (or mps/xpu) tensor look like a CUDA one."""
    torch = pytest.importorskip("torch")
    fixed, _ = _fix(tmp_path, IS_CUDA)
    assert "x.device.type == _migrate_accelerator_type()" in fixed
    monkeypatch.syspath_prepend(str(tmp_path / "portable"))
    sys.modules.pop("_migrate_runtime", None)
    original, migrated = {}, {}
    try:
        exec(compile(IS_CUDA, "original", "exec"), original)
        exec(compile(fixed, "migrated", "exec"), migrated)
    finally:
        sys.modules.pop("_migrate_runtime", None)
    for x in (torch.ones(1), torch.empty(2, device="meta")):
        assert original["on_accelerator"](x) is migrated["on_accelerator"](x) is False


@pytest.mark.parametrize("shape", [
    'from typing import Literal\n\nDevice = Literal["cpu", "cuda", "auto"]\n',
    'from typing import Literal\n\n\ndef run(device: Literal["cpu", "cuda"] = "cpu") -> Literal["cpu", "cuda"]:\n    return device\n',
    'from typing import Literal\n\nmode: Literal["cpu", "cuda"] = "cpu"\n',
    'def pick(device: "cuda | cpu" = "cpu"):\n    return device\n',  # a string annotation
    'ALLOWED = {"cpu", "cuda"}\n',
    'ALLOWED = ("cpu", "cuda", "mps")\n',
    'import argparse\n\np = argparse.ArgumentParser()\np.add_argument("--device", choices=["cpu", "cuda", "auto"], default="cpu")\n',
])
@pytest.mark.parametrize("target", ["npu", "portable"])
def test_names_a_user_may_type_are_left_alone(tmp_path, shape, target):
    fixed, findings = _fix(tmp_path, shape, target)
    assert findings == [] and fixed == shape


def test_a_device_selection_next_to_an_annotation_is_still_fixed(tmp_path):
    source = 'from typing import Literal\n\n\ndef run(device: Literal["cpu", "cuda"] = "cuda"):\n    return device\n'
    fixed, findings = _fix(tmp_path, source, "npu")
    assert [f.code for f in findings] == ["DEV012"]
    assert 'Literal["cpu", "cuda"] = "npu"' in fixed  # the default selects a device; the annotation names them
