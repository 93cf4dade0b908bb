"""Migrated code is lint-proof and self-sufficient: `ruff check --select F --fix` (pyflakes, F401
unused imports included) on the output removes nothing the migration added (above all
`import torch_npu`, which registers the device and is unused as a name), and every file that uses
NPU names imports torch_npu."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from migrator import api
from migrator.fix.torch_pin import read_torch_pin
from tests.fix.programs import HEADER, shapes_for

REPO = Path(__file__).resolve().parents[2]
SAMPLES = ("gpt", "moe", "resnet")
FIX_FIXTURES = REPO / "tests" / "fixtures" / "fix"
USES_NPU = re.compile(r"""\.npu\(|\btorch\.npu\b|\btorch_npu\.|["']npu\b""")
IMPORTS_TORCH_NPU = re.compile(r"^\s*import torch_npu\b", re.MULTILINE)


def _ruff() -> list[str]:
    if shutil.which("ruff"):
        return ["ruff"]
    pytest.importorskip("ruff", reason="ruff (the dev extra) is not installed")
    return [sys.executable, "-m", "ruff"]


def _sources(tmp_path: Path) -> Path:
    """Samples and fixture files, each a tree of its own, as `migrate fix` input."""
    src = tmp_path / "src"
    for sample in SAMPLES:
        shutil.copytree(REPO / "samples" / sample, src / sample)
    fixtures = src / "fixtures"
    fixtures.mkdir()
    for path in FIX_FIXTURES.glob("*.in.py"):
        shutil.copy(path, fixtures / path.name.replace(".in.py", ".py"))
    (fixtures / "syntax_shapes.py").write_text(HEADER + "\n\n".join(shapes_for().values()))
    only_moves = "import torch\n\n\ndef put(t):\n    return t.cuda()\n"  # `.cuda()` is its only finding
    (fixtures / "only_moves.py").write_text(only_moves)
    for tree in src.iterdir():
        (tree / "pyproject.toml").touch()
    return src


@pytest.mark.slow
@pytest.mark.parametrize("target", ["npu", "portable"])
def test_ruff_fix_removes_nothing_the_migration_needs(tmp_path, target):
    ruff = _ruff()
    src = _sources(tmp_path)
    out = tmp_path / "out"
    for tree in sorted(src.iterdir()):
        outcome = api.fix([tree], root=tree, target=target, out_dir=out / tree.name, use_cache=False)
        assert outcome.errors == []
    fixed = {p: p.read_text() for p in out.rglob("*.py") if ".migrate" not in p.parts}
    assert target != "npu" or any(USES_NPU.search(t) for t in fixed.values())
    for path, text in fixed.items():
        # a tree pinning torch >= 2.5.1 loads torch_npu on `import torch` (fix/torch_pin.py): only the name needs it
        autoload = read_torch_pin(src / path.relative_to(out).parts[0]).autoload
        if USES_NPU.search(text) and not (autoload and "torch_npu." not in text):
            assert IMPORTS_TORCH_NPU.search(text), f"{path.relative_to(out)} uses NPU names without importing torch_npu"
    subprocess.run(
        [*ruff, "check", "--isolated", "--no-cache", "--select", "F", "--fix", "--exit-zero", "-q", str(out)],
        check=True,
    )
    for path, text in fixed.items():
        after = path.read_text()
        rel = path.relative_to(out)
        original = (src / rel).read_text() if (src / rel).exists() else ""  # the portable `_migrate_runtime.py` is new
        removed = Counter(text.splitlines()) - Counter(after.splitlines())
        added_by_fix = Counter(text.splitlines()) - Counter(original.splitlines())
        assert not (removed & added_by_fix), f"ruff removed lines the migration added to {rel}: {list(removed & added_by_fix)}"
        assert len(IMPORTS_TORCH_NPU.findall(after)) == len(IMPORTS_TORCH_NPU.findall(text)), rel
