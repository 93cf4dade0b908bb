"""The portable target's `_migrate_runtime.py`: one per tree (per script folder / top package),
written inside the fix transaction, recorded in the ledger, never replacing a user's file, and
found by the migrated files from any working directory and as a package."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from migrator import api
from migrator.fix import ledger, runtime_module
from migrator.fix.runtime_module import MODULE_FILE, RuntimeImport, location

CUDA = "import torch\n\n\ndef step(x):\n    torch.cuda.synchronize()\n    return x.cuda()\n"
RECORD = ".migrate/fix-record.json"


def _tree(root: Path, files: dict[str, str]) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "pyproject.toml").write_text("")
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return root


def _fix(root: Path, **kwargs):
    return api.fix([root], root=root, target="portable", use_cache=False, **kwargs)


def _record(root: Path) -> dict:
    return json.loads((root / RECORD).read_text())


def test_location_by_folder_kind(tmp_path):
    _tree(tmp_path, {"a.py": "", "tools/b.py": "", "pkg/__init__.py": "", "pkg/sub/__init__.py": "", "pkg/sub/c.py": ""})
    assert location(tmp_path, "a.py") == RuntimeImport(MODULE_FILE, 0)
    assert location(tmp_path, "tools/b.py") == RuntimeImport(f"tools/{MODULE_FILE}", 1)  # beside it, relative
    assert location(tmp_path, "pkg/sub/c.py") == RuntimeImport(f"pkg/{MODULE_FILE}", 2)
    assert location(tmp_path, "pkg/c.py") == RuntimeImport(f"pkg/{MODULE_FILE}", 1)


def test_another_importable_module_of_that_name_keeps_root_files_inline(tmp_path, monkeypatch):
    elsewhere = _tree(tmp_path / "site", {MODULE_FILE: "def _migrate_device():\n    return 'theirs'\n"})
    monkeypatch.syspath_prepend(str(elsewhere))
    root = _tree(tmp_path / "repo", {"train.py": CUDA, "pkg/__init__.py": "", "pkg/m.py": CUDA})
    _fix(root)
    assert "def _migrate_device(index=None):" in (root / "train.py").read_text()  # inline, not theirs
    assert "from ._migrate_runtime import" in (root / "pkg/m.py").read_text()  # relative: cannot pick theirs


def test_one_module_for_the_files_of_a_folder_recorded_and_idempotent(tmp_path):
    root = _tree(tmp_path, {"train.py": CUDA, "model.py": CUDA.replace("step", "forward")})
    outcome = _fix(root)
    assert (root / MODULE_FILE).read_text() == runtime_module.text()
    assert sorted(outcome.changed_files) == [MODULE_FILE, "model.py", "train.py"]
    for name in ("train.py", "model.py"):
        text = (root / name).read_text()
        assert "from _migrate_runtime import _migrate_device, _migrate_device_module\n" in text
        assert "def _migrate_device" not in text and "torch_npu" not in text  # the module imports torch_npu
    entry = {"path": MODULE_FILE, "sha256": ledger.sha256((root / MODULE_FILE).read_bytes())}
    assert _record(root)["runtime_modules"] == [entry]
    before = {p.name: p.read_bytes() for p in root.iterdir() if p.is_file()}
    again = _fix(root)
    assert again.changed_files == []
    assert {p.name: p.read_bytes() for p in root.iterdir() if p.is_file()} == before
    assert _record(root)["runtime_modules"] == [entry]  # kept: the file still holds what was written


def test_a_users_file_of_that_name_is_never_replaced(tmp_path):
    mine = "def _migrate_device():\n    return 'mine'\n"
    root = _tree(tmp_path, {"train.py": CUDA, MODULE_FILE: mine})
    outcome = _fix(root)
    assert (root / MODULE_FILE).read_text() == mine
    assert MODULE_FILE not in outcome.changed_files and outcome.errors == []
    text = (root / "train.py").read_text()
    assert "from _migrate_runtime" not in text and "def _migrate_device(index=None):" in text  # inline
    assert _record(root)["runtime_modules"] == []


def test_an_older_module_of_ours_is_updated_but_an_edited_one_is_kept(tmp_path):
    root = _tree(tmp_path, {"train.py": CUDA})
    _fix(root)
    old = "# an older version of the helpers\n" + runtime_module.text()
    (root / MODULE_FILE).write_text(old)
    record = _record(root)
    record["runtime_modules"] = [{"path": MODULE_FILE, "sha256": ledger.sha256(old.encode())}]
    (root / RECORD).write_text(json.dumps(record))
    (root / "eval.py").write_text(CUDA)
    _fix(root)
    assert (root / MODULE_FILE).read_text() == runtime_module.text()  # recorded as ours: replaced

    edited = runtime_module.text() + "\n# my change\n"
    (root / MODULE_FILE).write_text(edited)  # edited by the user since: no longer ours to replace
    (root / "bench.py").write_text(CUDA)
    _fix(root)
    assert (root / MODULE_FILE).read_text() == edited
    assert "def _migrate_device(index=None):" in (root / "bench.py").read_text()
    assert _record(root)["runtime_modules"] == []


def test_check_writes_nothing_and_out_writes_only_the_copy(tmp_path):
    root = _tree(tmp_path / "src", {"train.py": CUDA})
    planned = _fix(root, write=False)
    assert MODULE_FILE in planned.changed_files and not (root / MODULE_FILE).exists()
    _fix(root, out_dir=tmp_path / "out")
    assert not (root / MODULE_FILE).exists()
    assert (tmp_path / "out" / MODULE_FILE).read_text() == runtime_module.text()


def test_npu_target_writes_no_module(tmp_path):
    root = _tree(tmp_path, {"train.py": CUDA})
    api.fix([root], root=root, target="npu", use_cache=False)
    assert not (root / MODULE_FILE).exists()


def _run(code: str, cwd: Path, path: Path | None = None) -> str:
    env = {**os.environ, "PYTHONPATH": str(path) if path else "", "CUDA_VISIBLE_DEVICES": ""}
    proc = subprocess.run([sys.executable, *code.split(" ", 1)] if code.endswith(".py") else [sys.executable, "-c", code],
                          cwd=cwd, env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout


# torch as far as these files and the runtime module need it at import and in `step`: the test is about
# where Python finds `_migrate_runtime`, and a real torch import per run would cost ~2 s of CPU each
TORCH_STUB = """
class device:
    def __init__(self, type, index=None):
        self.type, self.index = type, index


class accelerator:
    @staticmethod
    def is_available():
        return False


class cuda:
    @staticmethod
    def synchronize():
        pass
"""
STEP = "import torch\n\ntorch.cuda.synchronize()\nprint('ran', __name__)\n"
RUN_TREE = {
    "train.py": STEP,  # a root script
    "scripts/prep.py": STEP,  # a plain sub-folder: by path, and `-m scripts.prep` (namespace package)
    "ext/__init__.py": "", "ext/tool/__init__.py": "",
    "ext/tool/run.py": STEP,  # a script inside a package, run by path: `python ext/tool/run.py`
    "ext/tool/cli.py": STEP + "\nif __name__ == '__main__':\n    print('main')\n",
    "ext/tool/rel.py": "from . import run\n" + STEP,  # a relative import: never ran by path
    "ext/layers.py": "from ext.tool import run\n" + STEP,  # needs its package importable
}


def _modes(root: Path, cwd: Path) -> dict[tuple[str, str], tuple[int, str]]:
    """(file, how) -> (exit status, stdout) for every file run by path from another folder and with `-m` from the root."""
    stub = cwd / "stub"
    (stub / "torch").mkdir(parents=True, exist_ok=True)
    (stub / "torch" / "__init__.py").write_text(TORCH_STUB)
    env = {**os.environ, "PYTHONPATH": str(stub)}
    out = {}
    for rel in RUN_TREE:
        if rel.endswith("__init__.py"):
            continue
        dotted = rel[: -len(".py")].replace("/", ".")
        for how, argv, where in (("path", [str(root / rel)], cwd), ("-m", ["-m", dotted], root)):
            proc = subprocess.run([sys.executable, *argv], cwd=where, env=env, capture_output=True, text=True, timeout=60)
            out[(rel, how)] = (proc.returncode, proc.stdout)
    return out


def test_every_migrated_file_runs_by_path_and_with_m_exactly_when_it_did_before(tmp_path):
    root = _tree(tmp_path / "repo", RUN_TREE)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    before = _modes(root, elsewhere)
    assert before[("ext/tool/run.py", "path")][0] == 0 and before[("ext/tool/rel.py", "path")][0] != 0
    _fix(root)
    for rel in ("scripts/prep.py", "ext/tool/run.py", "ext/tool/cli.py", "ext/layers.py"):
        assert "_migrate_runtime import _migrate_device_module" in (root / rel).read_text()
    assert "from _migrate_runtime import" in (root / "train.py").read_text()
    after = _modes(root, elsewhere)
    assert {k: v[0] == 0 for k, v in after.items()} == {k: v[0] == 0 for k, v in before.items()}
    assert {k: v[1] for k, v in after.items() if v[0] == 0} == {k: v[1] for k, v in before.items() if v[0] == 0}
    again = _fix(root)  # idempotent: the runtime block is recognised
    assert again.changed_files == []


@pytest.mark.slow
def test_migrated_files_find_the_module_from_another_cwd_and_as_a_package(tmp_path):
    pytest.importorskip("torch")
    script = CUDA + "\n\nif __name__ == '__main__':\n    import torch\n\n    print(step(torch.ones(1)).device)\n"
    root = _tree(tmp_path / "repo", {
        "tools/run.py": script,  # a script in a plain folder, run by path from elsewhere
        "pkg/__init__.py": "", "pkg/sub/__init__.py": "", "pkg/sub/layers.py": CUDA,  # package modules
        "pkg/sub/cli.py": script,  # a package module that is also a script
    })
    _fix(root)
    assert (root / "tools" / MODULE_FILE).is_file() and (root / "pkg" / MODULE_FILE).is_file()
    assert "from .._migrate_runtime import" in (root / "pkg/sub/layers.py").read_text()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    assert _run(f"{root / 'tools' / 'run.py'}", cwd=elsewhere).strip() == "cpu"
    out = _run("import torch, pkg.sub.layers as m; print(m.step(torch.ones(1)).device)", cwd=elsewhere, path=root)
    assert out.strip() == "cpu"
    assert "from .._migrate_runtime import" in (root / "pkg/sub/cli.py").read_text()
    assert _run(f"{root / 'pkg' / 'sub' / 'cli.py'}", cwd=elsewhere, path=root).strip() == "cpu"  # by path
    assert _run("import runpy; runpy.run_module('pkg.sub.cli', run_name='__main__')", cwd=elsewhere, path=root).strip() == "cpu"


def test_the_module_scans_clean(tmp_path):
    """A re-scan after the fix finds nothing in it: no finding, no CUDA-looking token outside docstrings."""
    root = _tree(tmp_path, {MODULE_FILE: runtime_module.text()})
    result = api.scan([root], root=root, use_cache=False)
    assert result.summary.files_scanned == 2  # the module and pyproject.toml
    assert result.findings == () and result.summary.unattributed_markers == 0


def test_a_file_is_not_written_when_its_module_could_not_be(tmp_path, monkeypatch):
    from migrator.fix import transaction as runner

    root = _tree(tmp_path, {"train.py": CUDA, "pkg/__init__.py": "", "pkg/m.py": CUDA})
    real_write = runner.atomic_write

    def failing(path, data, **kw):
        if path.parent == root.resolve() and path.name == MODULE_FILE:
            raise PermissionError(13, "Permission denied")
        real_write(path, data, **kw)

    monkeypatch.setattr(runner, "atomic_write", failing)
    outcome = _fix(root)
    errors = dict(outcome.errors)
    assert "Permission denied" in errors[MODULE_FILE]
    assert "would import _migrate_runtime.py, which could not be written" in errors["train.py"]
    assert (root / "train.py").read_text() == CUDA  # left as it was, never importing a missing module
    assert "from ._migrate_runtime import" in (root / "pkg/m.py").read_text()  # its own module was written
    assert [e["path"] for e in _record(root)["runtime_modules"]] == ["pkg/_migrate_runtime.py"]
