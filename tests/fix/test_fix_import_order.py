"""Imports the fix adds sit where isort / ruff would sort them: `ruff check --select I` finds nothing
new in a migrated tree whose input was clean, under the repository's own isort settings."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from migrator import api
from tests.fix.test_fix_lint import _sources

pytestmark = pytest.mark.skipif(shutil.which("ruff") is None, reason="ruff (the dev extra) is not installed")


def _ruff_i(tree: Path) -> set[str]:
    """Files with an isort finding, ruff run from the tree's root as its user would."""
    run = subprocess.run([str(shutil.which("ruff")), "check", "--no-cache", "--select", "I", "--output-format", "json", "--exit-zero", "."],
                         cwd=tree, capture_output=True, text=True, check=True)
    return {Path(d["filename"]).relative_to(tree.resolve()).as_posix() for d in json.loads(run.stdout)}


def _fixed(tmp_path: Path, files: dict[str, str], target: str = "npu") -> Path:
    tree = tmp_path / "repo"
    tree.mkdir()
    for name, text in files.items():
        (tree / name).write_text(text)
    assert _ruff_i(tree) == set(), "the input is sorted"
    outcome = api.fix([tree], root=tree, target=target, use_cache=False)
    assert outcome.errors == []
    return tree


def test_torch_npu_sorts_after_every_torch_module(tmp_path):
    tree = _fixed(tmp_path, {"pyproject.toml": "", "train.py": (
        "import os\n\nimport numpy as np\nimport torch\nimport torch.nn as nn\nimport tqdm\nfrom torch import optim\n\n"
        "model = nn.Linear(2, 2).cuda()\nprint(os, np, tqdm, optim)\n")})
    text = (tree / "train.py").read_text()
    assert text.index("import torch.nn as nn\nimport torch_npu") < text.index("import tqdm")
    assert _ruff_i(tree) == set()


def test_the_repository_style_is_followed(tmp_path):
    tree = _fixed(tmp_path, {
        "pyproject.toml": "[tool.ruff.lint.isort]\nforce-sort-within-sections = true\n",
        "train.py": "import torch\nfrom torch import nn\nimport torchvision\n\nm = nn.Linear(2, 2).cuda()\nprint(torchvision)\n",
    })
    text = (tree / "train.py").read_text()
    assert "from torch import nn\nimport torch_npu" in text
    assert _ruff_i(tree) == set()


def test_a_file_without_import_torch_gets_torch_npu_in_its_third_party_block(tmp_path):
    tree = _fixed(tmp_path, {"pyproject.toml": "", "m.py": (
        "import os\n\nfrom torch import nn\n\nLAYER = nn.Linear(2, 2).cuda()\nprint(os)\n")})
    assert "import os\n\nimport torch_npu" in (tree / "m.py").read_text()
    assert _ruff_i(tree) == set()


@pytest.mark.slow
@pytest.mark.parametrize("target", ["npu", "portable"])
def test_migrated_samples_and_fixtures_have_no_new_isort_findings(tmp_path, target):
    src = _sources(tmp_path)
    clean = {tree.name: _ruff_i(tree) for tree in src.iterdir()}
    out = tmp_path / "out"
    for tree in sorted(src.iterdir()):
        assert api.fix([tree], root=tree, target=target, out_dir=out / tree.name, use_cache=False).errors == []
        assert _ruff_i(out / tree.name) <= clean[tree.name], tree.name
