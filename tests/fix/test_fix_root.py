"""The root is where the user stands: found from the paths as given, never from where a link points;
an explicit symlink loop is a usage error (exit 2) naming it."""

from __future__ import annotations

from pathlib import Path

from migrator import api
from tests.conftest import run_cli

CUDA = "import torch\nx = torch.zeros(2).cuda()\n"


def test_fix_of_a_link_out_of_the_project_writes_nothing_beside_the_target(tmp_path: Path):
    mine, theirs = tmp_path / "mine", tmp_path / "theirs"
    for folder in (mine, theirs):
        folder.mkdir()
        (folder / "pyproject.toml").write_text('[project]\nname = "x"\n')
    (theirs / "train.py").write_text(CUDA)
    (mine / "link.py").symlink_to(theirs / "train.py")
    outcome = api.fix([mine / "link.py"], target="npu")
    assert outcome.written_to == mine
    assert not (theirs / ".migrate").exists()
    assert (theirs / "train.py").read_text() == CUDA  # outside the root: never written
    assert not outcome.changed_files


def test_an_explicit_symlink_loop_is_exit_2_naming_it(tmp_path: Path):
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "x"\n')
    (tmp_path / "a").symlink_to(tmp_path / "b")
    (tmp_path / "b").symlink_to(tmp_path / "a")
    for command in ("scan", "fix"):
        result = run_cli(command, "a", cwd=tmp_path)
        assert result.returncode == 2, result.stderr
        assert "a: a symlink loop" in result.stderr
