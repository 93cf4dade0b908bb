"""Where the npu target puts `import torch_npu` (fix/torch_pin.py, issue 39 item 4): a repository pinning
torch >= 2.5.1 gets it at entry points only (torch_npu autoloads through the `torch.backends` entry
point), an older or absent pin keeps it in every module that needs the npu device, and portable output
still imports on a CPU-only host."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from migrator import api
from migrator.fix.torch_pin import read_torch_pin

LIBRARY = "import torch\n\n\ndef place(x):\n    return x.cuda()\n"
SCRIPT = "import torch\n\n\ndef main():\n    print(torch.zeros(1).cuda())\n\n\nif __name__ == '__main__':\n    main()\n"
TEST = "import torch\n\n\ndef test_place():\n    assert torch.cuda.is_available() or True\n"


def _tree(root: Path, pins: dict[str, str]) -> Path:
    for name, text in {**pins, "lib/place.py": LIBRARY, "lib/__init__.py": "", "train.py": SCRIPT,
                       "tests/test_place.py": TEST}.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    return root


def _imports_torch_npu(text: str) -> bool:
    return any(line.lstrip().startswith("import torch_npu") for line in text.splitlines())


@pytest.mark.parametrize("pins", [
    {"requirements.txt": "numpy\ntorch>=2.6\n"},
    {"pyproject.toml": '[project]\nname = "x"\ndependencies = ["torch==2.7.1"]\n'},
    {"setup.py": "from setuptools import setup\nsetup(name='x', install_requires=['torch>=2.5.1,<3'])\n"},
])
def test_a_tree_pinning_autoload_torch_imports_torch_npu_at_entry_points_only(tmp_path, pins):
    root = _tree(tmp_path, pins)
    outcome = api.fix([root], root=root, target="npu", use_cache=False)
    assert "cuda" not in (root / "lib/place.py").read_text()  # fixed
    assert not _imports_torch_npu((root / "lib/place.py").read_text())
    assert not _imports_torch_npu((root / "tests/test_place.py").read_text())
    assert _imports_torch_npu((root / "train.py").read_text())
    assert any("entry points only" in note for note in outcome.plan.notes)


@pytest.mark.parametrize("pins", [
    {"requirements.txt": "torch==2.1.0\n"},
    {},  # no pin: today's behaviour
    {"requirements.txt": "torch>=2.6\n", "requirements-dev.txt": "torch\n"},  # any torch may be installed
    {"requirements.txt": "torch>=2.6\n", "requirements-old.txt": "torch>=2.4,<2.5\n"},  # the lowest wins
])
def test_an_older_or_absent_torch_pin_keeps_the_per_module_import(tmp_path, pins):
    root = _tree(tmp_path, pins)
    outcome = api.fix([root], root=root, target="npu", use_cache=False)
    assert _imports_torch_npu((root / "lib/place.py").read_text())
    assert _imports_torch_npu((root / "train.py").read_text())
    assert any("every module" in note for note in outcome.plan.notes)


def test_autoload_starts_at_torch_2_5_1(tmp_path):
    from packaging.version import Version

    from migrator.fix.torch_pin import TorchPin

    (tmp_path / "requirements.txt").write_text("torch~=2.5.1  # pinned\n")
    assert read_torch_pin(tmp_path) == TorchPin(Version("2.5.1"), "requirements.txt")
    assert TorchPin(Version("2.5.1"), "r.txt").autoload
    assert not TorchPin(Version("2.5.0"), "r.txt").autoload
    assert not TorchPin(None, "").autoload


def test_portable_output_imports_on_a_cpu_only_host(tmp_path):
    pytest.importorskip("torch")
    root = _tree(tmp_path, {"requirements.txt": "torch>=2.6\n"})
    api.fix([root], root=root, target="portable", use_cache=False)
    env = {**os.environ, "PYTHONPATH": str(root), "CUDA_VISIBLE_DEVICES": ""}
    for module in ("lib.place", "train", "tests.test_place"):
        done = subprocess.run([sys.executable, "-c", f"import {module}"], cwd=root, env=env, capture_output=True,
                              text=True, timeout=120)
        assert done.returncode == 0, done.stderr


def test_a_module_level_import_beside_a_function_local_one_keeps_its_noqa(tmp_path):
    """ultralytics imports torch_npu inside the method that uses it; the module-level import the fix adds
    is then unused as a name (F401, which `ruff --fix` would delete): it carries the noqa comment."""
    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / "trainer.py").write_text(
        "import torch\n\n\ndef scaler(device):\n    if device.type == 'npu':\n        import torch_npu\n\n"
        "        return torch_npu.npu.amp.GradScaler()\n    torch.cuda.synchronize()\n")
    api.fix([tmp_path], root=tmp_path, target="npu", use_cache=False)
    text = (tmp_path / "trainer.py").read_text()
    assert 'import torch_npu  # noqa: F401  registers the Ascend "npu" device\n' in text
    assert "torch.npu.synchronize()" in text
