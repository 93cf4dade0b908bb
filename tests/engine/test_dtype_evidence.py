"""The tree's training dtypes come from what the scan workers read (engine/scanned.py): one file's
bf16 judges another file's ops, with or without the cache, and only through the capped reader."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

from migrator import api
from migrator.engine.workers import WorkerLost, WorkerPool
from migrator.ground.input_files import MAX_SOURCE_BYTES

MODEL = "import torch\nx = torch.zeros(3)\ny = torch.nn.functional.grid_sample(x, x)\n"
NOTE = "`torch.nn.functional.grid_sample` is documented on A2 for fp16, fp32, fp64; the program uses bf16"


def _notes(tree: Path, **options: object) -> list[tuple[str, int, str]]:
    result = api.scan([tree], root=tree, **options)
    return [(f.path, f.line, f.message) for f in result.findings if f.code == "OPS004"]


def test_another_files_bf16_judges_the_op_with_the_cache_warm_and_cold(tmp_path, monkeypatch):
    monkeypatch.setenv("MIGRATE_CACHE_DIR", str(tmp_path / "cache"))
    tree = tmp_path / "tree"
    tree.mkdir()
    (tree / "pyproject.toml").write_text("")
    (tree / "model.py").write_text(MODEL)
    (tree / "train.py").write_text("import torch\nDTYPE = torch.float32\n")
    assert _notes(tree) == []
    (tree / "train.py").write_text("import torch\nDTYPE = torch.bfloat16\n")  # model.py unchanged: cached
    assert _notes(tree) == [("model.py", 3, NOTE)]
    assert _notes(tree) == _notes(tree, use_cache=False) == [("model.py", 3, NOTE)]
    (tree / "train.py").write_text("import torch\nDTYPE = torch.float32\n")
    assert _notes(tree) == []


def test_a_file_the_scan_refuses_to_read_shows_no_training_dtype(tmp_path):
    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / "model.py").write_text(MODEL)
    (tmp_path / "big.py").write_text("DTYPE = 'bf16'\n" + "#" * MAX_SOURCE_BYTES + "\n")
    result = api.scan([tmp_path], root=tmp_path, use_cache=False)
    assert any(f.path == "big.py" and "cannot read" in f.message for f in result.findings)
    assert [f for f in result.findings if f.code == "OPS004"] == []


def _die_on_two(n: int) -> int:
    if n == 2:
        os.kill(os.getpid(), signal.SIGKILL)
    return n


def test_a_killed_worker_is_reported_not_waited_for():
    pool = WorkerPool(2)
    try:
        with pytest.raises(WorkerLost, match="exit code"):
            list(pool.map(_die_on_two, range(6)))
    finally:
        pool.terminate()
