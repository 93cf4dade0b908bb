"""A short scan's start-up: a scan of one Python file imports only what it uses (issue 43: a scan of a
one-line file cost ~0.28 s of CPU, mostly imports). What each module below is for, and why a Python
scan without configs, globs, git, a pyproject.toml, a fix record or a pool does not need it, is said where
it is imported."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import run_cli

NOT_NEEDED = {
    "cattrs", "attrs",  # JSON is written without the converter (ground/serialise.py)
    "yaml",  # the catalogue is kept built (catalogue/rule_cache.py); YAML configs are read on demand
    "multiprocessing",  # one process: no pool
    "pathspec",  # no glob to compile
    "importlib.resources", "zipfile",  # shipped data found on disk
    "subprocess",  # no git work tree
    "tomllib", "configparser",  # no pyproject.toml, no setup.cfg
    "migrator.ground.fix_record",  # no fix record
    "ctypes", "libcst", "torch",
    # the checkers of other kinds of file: configs, notebooks, shell/requirements/Dockerfiles, CUDA sources
    "migrator.engine.config_checker", "migrator.engine.notebook", "migrator.engine.text_checkers",
    "migrator.engine.cuda_file",
}


@pytest.mark.parametrize("fmt", ["json", "text"])
def test_a_scan_of_one_python_file_imports_only_what_it_uses(tmp_path: Path, fmt: str) -> None:
    (tmp_path / "train.py").write_text("import torch\nx = torch.zeros(2).cuda()\n")
    args = ("scan", str(tmp_path), "--root", str(tmp_path), "--no-cache", "-j", "1", "-q", "--format", fmt,
            "--exit-zero")
    run_cli(*args)  # the catalogue kept built, as after any first run
    proc = run_cli(*args, env={"PYTHONPROFILEIMPORTTIME": "1"})
    assert proc.returncode == 0, proc.stderr[-2000:]
    imported = {line.split("|")[-1].strip() for line in proc.stderr.splitlines() if "|" in line}
    assert "migrator.engine.python_checker" in imported  # the probe works
    assert "DEV" in proc.stdout  # and the scan found the `.cuda()`
    assert not imported & NOT_NEEDED, sorted(imported & NOT_NEEDED)


def test_the_kept_dataclass_code_is_what_its_text_compiles_to(tmp_path: Path) -> None:
    """A CLI run keeps the code dataclasses generated; a run with the file corrupt writes the same report."""
    from migrator.ground import dataclass_code

    (tmp_path / "tree").mkdir()
    (tmp_path / "tree" / "train.py").write_text("import torch\nx = torch.zeros(2).cuda()\n")
    args = ("scan", str(tmp_path / "tree"), "--no-cache", "-j", "1", "--format", "json", "--exit-zero")
    env = {"MIGRATE_CACHE_DIR": str(tmp_path / "cache")}
    first = run_cli(*args, env=env)
    (kept,) = (tmp_path / "cache" / "dataclass-code").glob("*.marshal")
    table = dataclass_code.read(kept)
    assert any("__init__(self,code:" in text and "family" in text for text in table)  # Finding's
    assert all(code == compile(text, "<string>", "exec") for text, code in table.items())
    data = bytearray(kept.read_bytes())
    data[len(data) // 2] ^= 0xFF
    kept.write_bytes(bytes(data))
    assert dataclass_code.read(kept) == {}  # its digest no longer matches
    second = run_cli(*args, env=env)
    assert second.stdout == first.stdout and second.returncode == first.returncode == 0
    assert dataclass_code.read(kept) == table  # written whole again


@pytest.mark.parametrize("content", [b"", b"\0" * 16 + b"garbage", b"short"])
def test_an_unreadable_dataclass_table_is_empty(tmp_path: Path, content: bytes) -> None:
    from migrator.ground import dataclass_code

    path = tmp_path / "table.marshal"
    path.write_bytes(content)
    assert dataclass_code.read(path) == {}
    assert dataclass_code.read(tmp_path / "missing.marshal") == {}


def test_an_unwritable_dataclass_table_folder_is_left_alone(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from migrator.ground import dataclass_code

    text = "def f():\n return 1\n"
    monkeypatch.setattr(dataclass_code, "_kept", {})
    monkeypatch.setattr(dataclass_code, "_new", {})
    namespace: dict = {}
    dataclass_code._exec(text, namespace)  # compiled, and new
    assert namespace["f"]() == 1 and text in dataclass_code._new
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    dataclass_code.keep(blocker / "below" / "t.marshal")  # no folder can be made under a file: no error
    dataclass_code.keep(tmp_path / "t.marshal")
    assert dataclass_code.read(tmp_path / "t.marshal") == {text: compile(text, "<string>", "exec")}
