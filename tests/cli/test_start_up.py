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
    "tempfile", "shutil",  # a report to stdout replaces no file (ground/safe_write.py)
    "packaging",  # no framework detected, so no route's version range is read (routes/table.py)
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
