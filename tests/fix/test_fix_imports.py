"""Imports a fix schedules are applied once per file (fix/imports.py): nothing bound twice, nothing
above the module docstring or `from __future__`, an existing import of the same module reused."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from migrator import api


def _fixed(tmp_path: Path, text: str, target: str, rel: str = "m.py", files: dict[str, str] | None = None) -> str:
    (tmp_path / "pyproject.toml").write_text("")
    for name, content in {**(files or {}), rel: text}.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(content)
    api.fix([tmp_path], root=tmp_path, target=target, use_cache=False)
    return (tmp_path / rel).read_text()


def _imports(text: str) -> list[str]:
    """Top-level import statements, as source, in order."""
    tree = ast.parse(text)
    return [ast.unparse(n) for n in tree.body if isinstance(n, (ast.Import, ast.ImportFrom))]


def _bound_twice(text: str) -> set[str]:
    seen: set[str] = set()
    twice = set()
    for node in ast.parse(text).body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            for alias in node.names:
                name = alias.asname or alias.name.split(".")[0]
                (twice if name in seen else seen).add(name)
    return twice


HEADER = '#!/usr/bin/env python\n"""Trains."""\nfrom __future__ import annotations\n\n'


@pytest.mark.parametrize("target, added", [("npu", "import torch_npu"), ("portable", "from _migrate_runtime import")])
def test_new_imports_go_after_the_docstring_and_future_imports(tmp_path, target, added):
    got = _fixed(tmp_path, HEADER + "\ndef f(x):\n    return x.cuda()\n", target)
    assert got.startswith(HEADER.rstrip("\n") + "\n")
    tree = ast.parse(got)
    assert ast.get_docstring(tree) == "Trains."
    assert isinstance(tree.body[1], ast.ImportFrom) and tree.body[1].module == "__future__"
    assert _imports(got)[1].startswith(added)


def test_an_existing_runtime_import_is_extended_not_repeated(tmp_path):
    text = "import torch\nfrom _migrate_runtime import _migrate_device_module\n\n\ndef f(x):\n    return x.cuda()\n"
    got = _fixed(tmp_path, text, "portable")
    runtime = [n for n in ast.parse(got).body if isinstance(n, ast.ImportFrom) and n.module == "_migrate_runtime"]
    assert len(runtime) == 1
    assert sorted(a.name for a in runtime[0].names) == ["_migrate_device", "_migrate_device_module"]


def test_only_the_runtime_names_a_file_uses_are_imported(tmp_path):
    text = 'import torch.distributed as dist\n\n\ndef f():\n    dist.init_process_group(backend="nccl")\n'
    got = _fixed(tmp_path, text, "portable")
    assert "from _migrate_runtime import _migrate_backend\n" in got  # its own _migrate_device is the module's


def test_a_helper_the_file_already_defines_is_neither_imported_nor_copied(tmp_path):
    own = "def _migrate_device(index=None):\n    return torch.device('cpu')\n"
    got = _fixed(tmp_path, f"import torch\n\n\n{own}\n\ndef f(x):\n    return x.cuda()\n", "portable")
    assert "_migrate_runtime" not in got and got.count("def _migrate_device(") == 1
    assert "x.to(_migrate_device())" in got


@pytest.mark.parametrize("target", ["npu", "portable"])
def test_modules_already_imported_are_not_imported_again(tmp_path, target):
    text = (
        "import contextlib\nimport torch\nimport torch_npu\nfrom apex import amp\n\n\n"
        "def f(model, opt, loss, x):\n    model, opt = amp.initialize(model, opt, opt_level='O1')\n"
        "    with amp.scale_loss(loss, opt) as scaled:\n        scaled.backward()\n"
        "    torch.cuda.synchronize()\n    return x.cuda(), x.cuda(), torch.cuda.current_device()\n"
    )
    got = _fixed(tmp_path, text, target)
    assert "_migrate_amp_initialize(" in got
    assert _bound_twice(got) == set()
    assert "from apex" not in got  # its last use is gone


def test_a_package_module_imports_the_runtime_relatively(tmp_path):
    files = {"pkg/__init__.py": "", "pkg/layers/__init__.py": ""}
    got = _fixed(tmp_path, "import torch\n\n\ndef f(x):\n    return x.cuda()\n", "portable", "pkg/layers/m.py", files)
    assert "from .._migrate_runtime import _migrate_device\n" in got
    assert (tmp_path / "pkg" / "_migrate_runtime.py").is_file()


def test_a_torch_import_the_portable_fix_left_unused_is_removed(tmp_path):
    """fairscale's cuda_metering.py used torch only as `torch.cuda.Event`; portable output reaches the device
    module through the runtime helper, and the `import torch` left behind was a new F401."""
    text = "import torch\n\n\ndef record():\n    event = torch.cuda.Event(enable_timing=True)\n    event.record()\n    return event\n"
    out = _fixed(tmp_path, text, "portable")
    assert "_migrate_device_module().Event(enable_timing=True)" in out
    assert "import torch" not in _imports(out)
    kept = _fixed(tmp_path, text + "\n\nzeros = torch.zeros(1)\n", "portable")
    assert "import torch" in _imports(kept)
