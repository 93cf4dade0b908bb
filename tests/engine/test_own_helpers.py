"""The code `migrate fix` inserts is never a finding nor an unattributed marker: recognised by the marker
it writes (and the fix record's runtime modules), not by a `_migrate_` name."""

from __future__ import annotations

import ast
import shutil
from pathlib import Path

import pytest

from migrator import api
from migrator.fix.helper_source import PACKAGE, module_text
from migrator.ground.own_code import OWN_MARKER, is_own_helper

SAMPLE = Path(__file__).resolve().parents[2] / "samples" / "gpt"
HELPER_MODULES = ["apex_amp", "apex_amp_npu", "apex_amp_portable", "device", "flash_attn_npu",
                  "flash_attn_portable", "rms_norm_npu"]


def _markers(root: Path) -> tuple[int, list[tuple[str, int]]]:
    s = api.scan([root], use_cache=False).summary
    return s.unattributed_markers, [(m.path, m.line) for m in s.unattributed]


@pytest.mark.parametrize("module", HELPER_MODULES)
def test_every_inserted_definition_carries_the_marker(module: str) -> None:
    for node in ast.parse(module_text(module)).body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            assert is_own_helper(node), f"{PACKAGE}.{module}.{node.name} lacks {OWN_MARKER!r}"


@pytest.mark.parametrize("target", ["npu", "portable"])
def test_fix_adds_no_unattributed_marker_of_its_own(tmp_path: Path, target: str) -> None:
    root = tmp_path / "gpt"
    shutil.copytree(SAMPLE, root)
    before, _ = _markers(root)
    api.fix([root], use_cache=False, jobs=1, target=target)
    after, listed = _markers(root)
    assert "_migrate_flash_attn_varlen" in (root / "model.py").read_text()  # the helper is there
    assert after <= before, listed
    result = api.scan([root], use_cache=False)
    text = {p.name: p.read_text().splitlines() for p in root.glob("*.py")}
    for f in result.findings:
        if f.path in text:
            assert "_migrate_" not in text[f.path][f.line - 1], f


def test_a_users_own_migrate_named_function_is_scanned(tmp_path: Path) -> None:
    (tmp_path / "train.py").write_text(
        "import torch\n\n\ndef _migrate_weights(model):\n    return model.cuda()\n")
    result = api.scan([tmp_path], use_cache=False)
    assert [f.code for f in result.findings if f.path == "train.py"] == ["DEV010"]


def test_a_marked_helper_is_neither_finding_nor_marker(tmp_path: Path) -> None:
    (tmp_path / "train.py").write_text(
        "import torch\n\n\ndef move(model):\n"
        '    """Moves. Added by ascend-migrate."""\n    return model.cuda()\n\n\n'
        "y = move(torch.nn.Linear(2, 2))\n")
    result = api.scan([tmp_path], use_cache=False)
    assert [f for f in result.findings if f.path == "train.py" and f.family != "coverage"] == []
    assert result.summary.unattributed_markers == 0


def test_the_runtime_module_counts_only_once_edited(tmp_path: Path) -> None:
    (tmp_path / "train.py").write_text("import torch\nx = torch.zeros(3).cuda()\ntorch.cuda.synchronize()\n")
    api.fix([tmp_path], use_cache=False, jobs=1, target="portable")
    module = tmp_path / "_migrate_runtime.py"
    assert module.is_file()
    module.write_text(module.read_text() + "\n\ntorch.cuda.synchronize()\n")  # the user's now
    assert _markers(tmp_path)[0] == 0
    result = api.scan([tmp_path], use_cache=False)
    assert [f.code for f in result.findings if f.path == "_migrate_runtime.py"] == ["DEV001"]
