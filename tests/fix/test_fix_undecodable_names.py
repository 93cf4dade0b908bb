"""A file name that is not valid UTF-8 never stops `fix` (issue 38: the journal could not be encoded and
no file was fixed): the record and journal carry it as a `\\udcXX` JSON escape (read back exactly),
the terminal shows the byte escaped, and every file is fixed."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from migrator import api
from tests.conftest import run_cli

CUDA = b"import torch\nx = y.cuda()\n"
ODD = b"b\xff.py"


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    root.mkdir()
    (root / "pyproject.toml").write_text("[project]\nname='x'\n")
    (root / "a.py").write_bytes(CUDA)
    try:
        (root / os.fsdecode(ODD)).write_bytes(CUDA)
    except (OSError, UnicodeError):
        pytest.skip("this filesystem refuses names that are not UTF-8")
    return root


def _odd(root: Path) -> Path:
    return Path(os.fsdecode(os.fsencode(str(root)) + b"/" + ODD))


def test_every_file_is_fixed_and_the_record_holds_the_exact_name(repo):
    api.fix([repo], use_cache=False)
    assert b"y.npu()" in (repo / "a.py").read_bytes() and b"y.npu()" in _odd(repo).read_bytes()
    raw = (repo / ".migrate" / "fix-record.json").read_bytes()
    raw.decode("utf-8")  # the record is UTF-8 text
    assert b'"b\\udcff.py"' in raw
    paths = {os.fsencode(f["path"]) for f in json.loads(raw)["files"]}
    assert paths == {b"a.py", ODD}
    again = api.fix([repo], use_cache=False)  # the record reads back
    assert not again.changed_files


def test_the_cli_shows_the_name_escaped(repo):
    proc = run_cli("fix", str(repo), "--no-cache", "--diff")
    assert proc.returncode in (0, 1), proc.stderr
    assert "+++ b/b\\xff.py" in proc.stdout and "internal error" not in proc.stderr


def test_a_journal_left_by_a_killed_run_recovers_with_the_name(repo):
    proc = run_cli("fix", str(repo), "--no-cache", env={"MIGRATE_FAULT_AT": "written"})
    assert proc.returncode != 0
    assert (repo / ".migrate" / "fix-journal.json").exists()
    proc = run_cli("fix", str(repo), "--no-cache")
    assert proc.returncode == 0, proc.stderr
    assert not (repo / ".migrate" / "fix-journal.json").exists()
    record = json.loads((repo / ".migrate" / "fix-record.json").read_bytes())
    assert {os.fsencode(f["path"]) for f in record["files"]} == {b"a.py", ODD}
