"""A fix is exact only where the target accepts it: Lightning's accelerator names, build files, and
`import torch_npu` only in modules that import torch. Plus the scan gaps of issue 26, from generic
reproductions."""

from __future__ import annotations

from pathlib import Path

from migrator import api


def _tree(tmp_path: Path, files: dict[str, str]) -> Path:
    root = tmp_path / "repo"
    root.mkdir()
    (root / "pyproject.toml").write_text("")
    for rel, text in files.items():
        (root / rel).write_text(text)
    return root


SETUP = '''from setuptools import setup

libraries = ["cudart"]
libraries.append("nccl")

if __name__ == "__main__":
    setup(name="ext", libraries=libraries)
'''


def test_build_file_strings_are_findings_with_guidance_not_swaps(tmp_path):
    root = _tree(tmp_path, {"setup.py": SETUP})
    result = api.scan([root], root=root, use_cache=False)
    (nccl,) = [f for f in result.findings if f.symbol == "nccl"]
    assert nccl.fix is None and "port the build by hand" in nccl.message
    outcome = api.fix([root], root=root, use_cache=False)
    assert (root / "setup.py").read_text() == SETUP and outcome.changed_files == []


def test_torch_npu_is_imported_only_into_modules_that_import_torch(tmp_path):
    script = 'import subprocess\n\nif __name__ == "__main__":\n    subprocess.run(["nvidia-smi"])\n    print("cuda:0")\n'
    root = _tree(tmp_path, {"probe.py": script, "train.py": 'import torch\n\nif __name__ == "__main__":\n    print(torch.ones(1).cuda())\n'})
    api.fix([root], root=root, use_cache=False)
    probe = (root / "probe.py").read_text()
    assert '"npu:0"' in probe and "torch_npu" not in probe  # fixed, but no torch here to register a device with
    assert "import torch_npu" in (root / "train.py").read_text()


def test_lightning_accelerator_cuda_is_manual(tmp_path):
    source = 'from lightning.fabric import Fabric\n\nfabric = Fabric(accelerator="cuda", devices=2)\n'
    root = _tree(tmp_path, {"train.py": source})
    result = api.scan([root], root=root, use_cache=False)
    assert [(f.code, f.fix) for f in result.findings] == [("DEV022", None)]
    api.fix([root], root=root, use_cache=False)
    assert (root / "train.py").read_text() == source


def test_cuda_double_tensor_is_fixed_like_its_float_sibling(tmp_path):
    source = "import torch\n\na = torch.cuda.FloatTensor(2)\nb = torch.cuda.DoubleTensor(2)\n"
    root = _tree(tmp_path, {"m.py": source})
    api.fix([root], root=root, use_cache=False)
    text = (root / "m.py").read_text()
    assert "torch.npu.FloatTensor(2)" in text and "torch.npu.DoubleTensor(2)" in text


GAPS = '''import torch


def build(cfg):
    import transformer_engine as te
    from transformer_engine.common import recipe

    with te.pytorch.fp8_autocast(enabled=True, fp8_recipe=recipe.DelayedScaling()):
        layer = te.pytorch.Linear(4, 4)
    return layer, transformer_engine_alias()


def transformer_engine_alias():
    import transformer_engine.common.recipe as r
    return r.DelayedScaling()


def report(log):
    log.info("nvidia-smi shows %d GPUs", torch.cuda.device_count())
'''


def test_scan_gaps_are_found(tmp_path):
    root = _tree(tmp_path, {
        "m.py": GAPS,
        "old_mcore.py": "from megatron.core.transformer.custom_layers.transformer_engine import TENorm\n",
        "lit.py": "from lightning.pytorch.plugins import BitsandbytesPrecision\n",
    })
    result = api.scan([root], root=root, use_cache=False, route="none")
    symbols = {(f.path, f.code, f.symbol) for f in result.findings}
    assert ("m.py", "KERN005", "transformer_engine.pytorch.fp8_autocast") in symbols
    assert ("m.py", "KERN005", "transformer_engine.pytorch.Linear") in symbols
    assert ("m.py", "KERN005", "transformer_engine.common.recipe.DelayedScaling") in symbols
    fp8 = [f for f in result.findings if f.symbol == "transformer_engine.pytorch.fp8_autocast"]
    assert len(fp8) == 1  # one finding per member and file, not per use
    assert ("old_mcore.py", "KERN005", "megatron.core.transformer.custom_layers.transformer_engine.TENorm") in symbols
    assert ("lit.py", "KERN006", "lightning.pytorch.plugins.BitsandbytesPrecision") in symbols
    assert not any(f.code == "KERN009" for f in result.findings)  # a log line mentioning nvidia-smi
