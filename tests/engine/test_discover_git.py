"""Discovery inside a git work tree asks git (`ls-files -co --exclude-standard`); outside one, or
without git, it walks the folders reading `.gitignore` itself. Both give the same files in the same order."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pathspec
import pytest

from migrator import api
from migrator.engine import discover as discover_module
from migrator.engine import git_files
from migrator.engine.discover import Candidate, Skip, discover
from migrator.ground import git_command

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
CUDA = "x.cuda()\n"


@pytest.fixture(autouse=True)
def own_git_config(tmp_path_factory, monkeypatch):
    """No user or system git configuration leaks in; a global excludes file of our own."""
    home = tmp_path_factory.mktemp("home")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / ".config"))
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    for name in ("GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", "GIT_PREFIX", "GIT_COMMON_DIR"):
        monkeypatch.delenv(name, raising=False)
    return home


def _git(cwd: Path, *args: str) -> None:
    subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", "-c", "protocol.file.allow=always", *args],
                   cwd=cwd, check=True, capture_output=True)


def _repo(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    _git(path, "init", "-q")
    return path


def _write(path: Path, text: str = CUDA) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def _found(root: Path, *starts: Path, exclude: list[str] | None = None) -> list[tuple[str, str]]:
    spec = pathspec.GitIgnoreSpec.from_lines(exclude) if exclude else None
    return [("file" if isinstance(i, Candidate) else i.reason, i.rel) for i in discover(root, list(starts) or [root], spec)]


def _files(root: Path, *starts: Path, exclude: list[str] | None = None) -> list[str]:
    return [rel for what, rel in _found(root, *starts, exclude=exclude) if what == "file"]


def test_info_exclude_and_global_excludes_count(tmp_path, own_git_config):
    root = _repo(tmp_path / "r")
    _write(root / "keep.py")
    _write(root / "local_only.py")
    _write(root / "scratch.py")
    (root / ".git" / "info").mkdir(exist_ok=True)
    (root / ".git" / "info" / "exclude").write_text("local_only.py\n")
    _write(own_git_config / ".config" / "git" / "ignore", "scratch.py\n")
    assert _files(root) == ["keep.py"]
    assert {f.path for f in api.scan([root], root=root, use_cache=False).findings} == {"keep.py"}


def test_untracked_files_count_and_tracked_files_are_never_ignored(tmp_path):
    root = _repo(tmp_path / "r")
    _write(root / "forced.py")
    _git(root, "add", "forced.py")
    _write(root / ".gitignore", "forced.py\nbuild/\n")
    _write(root / "build" / "out.py")
    _write(root / "new" / "untracked.py")
    _write(root / "sub" / ".gitignore", "*_gen.py\n")
    _write(root / "sub" / "a_gen.py")
    _write(root / "sub" / "b.py")
    assert _files(root) == ["forced.py", "new/untracked.py", "sub/b.py"]


def test_order_and_files_match_the_walk_without_git(tmp_path, monkeypatch):
    """The same tree with git and with the fallback walk: the same files, in the same order."""
    root = tmp_path / "r"
    for rel in ("b.py", "a.sh", "Dockerfile", "z/y.py", "z/a/deep.py", "m/req/requirements.txt", "m/x.cu", "m.py"):
        _write(root / rel)
    _write(root / ".gitignore", "z/a/\n")
    walked = _found(root)
    _repo(root)
    listed = _found(root)
    assert listed == walked
    assert [rel for _, rel in listed] == ["Dockerfile", "a.sh", "b.py", "m.py", "m/x.cu", "m/req/requirements.txt", "z/y.py"]
    monkeypatch.setattr(git_command.shutil, "which", lambda name: None)  # git not installed
    assert _found(root) == walked


def test_non_utf8_file_name_is_found_and_openable(tmp_path):
    if os.name == "nt":
        pytest.skip("bytes file names are POSIX")
    root = _repo(tmp_path / "r")
    raw = os.path.join(os.fsencode(root), b"caf\xe9.py")
    try:
        with open(raw, "wb") as fh:
            fh.write(CUDA.encode())
    except OSError:
        pytest.skip("the file system refuses non-UTF-8 names")
    [cand] = [i for i in discover(root, [root], None) if isinstance(i, Candidate)]
    assert os.fsencode(cand.path) == raw and cand.path.read_text() == CUDA


def test_submodule_is_skipped_unless_named_and_nested_repository_is_scanned(tmp_path):
    upstream = _repo(tmp_path / "upstream")
    _write(upstream / "gemm.cu", "__global__ void k() {}\n")
    _git(upstream, "add", ".")
    _git(upstream, "commit", "-qm", "u")
    root = _repo(tmp_path / "r")
    _write(root / "mine.py")
    _git(root, "submodule", "add", "-q", str(upstream), "csrc/cutlass")
    nested = _repo(root / "tools" / "other")  # a repository inside, not a submodule
    _write(nested / "t.py")
    assert _found(root) == [
        ("file", "mine.py"),
        (discover_module.SUBMODULE_SKIP, "csrc/cutlass"),
        ("file", "tools/other/t.py"),
    ]
    assert _files(root, root / "csrc" / "cutlass") == ["csrc/cutlass/gemm.cu"]


def test_symlinked_folders(tmp_path):
    outside = tmp_path / "outside"
    _write(outside / "secret.py")
    root = _repo(tmp_path / "r")
    _write(root / "pkg" / "m.py")
    _write(root / "shared" / "s.py")
    os.symlink(root / "pkg", root / "pkg" / "loop")
    os.symlink(root / "pkg", root / "alias")
    os.symlink(outside, root / "pkg" / "out")
    os.symlink(root / "shared", root / "src_shared")
    found = _found(root)
    assert ("symlink loop", "pkg/loop") in found
    assert ("symlink pointing outside the scan root", "pkg/out") in found
    assert ("symlink to a folder inside the scanned tree: not followed", "alias") in found
    assert _files(root) == ["pkg/m.py", "shared/s.py"]
    # a folder scanned by name follows a link to the rest of the root
    assert _files(root, root / "pkg", root / "src_shared") == ["pkg/m.py", "src_shared/s.py"]


def test_always_skipped_and_excluded_folders_even_when_tracked(tmp_path):
    root = _repo(tmp_path / "r")
    _write(root / "node_modules" / "pkg" / "x.py")
    _write(root / ".venv" / "lib" / "y.py")
    _write(root / "vendor" / "v.py")
    _write(root / "vendor" / "keep" / "k.py")
    _write(root / "ok.py")
    _git(root, "add", "-f", ".")
    assert _files(root, exclude=["vendor/"]) == ["ok.py"]
    assert _files(root, root / ".venv") == [".venv/lib/y.py"]  # asked for by name


def test_deleted_tracked_file_is_not_listed(tmp_path):
    root = _repo(tmp_path / "r")
    _write(root / "gone.py")
    _write(root / "here.py")
    _git(root, "add", ".")
    (root / "gone.py").unlink()
    assert _files(root) == ["here.py"]


def test_git_variables_from_a_hook_do_not_redirect_the_listing(tmp_path, monkeypatch):
    other = _repo(tmp_path / "other")
    _write(other / "theirs.py")
    root = _repo(tmp_path / "r")
    _write(root / "mine.py")
    monkeypatch.setenv("GIT_DIR", str(other / ".git"))
    monkeypatch.setenv("GIT_WORK_TREE", str(other))
    assert _files(root) == ["mine.py"]


def test_folder_outside_a_work_tree_is_walked(tmp_path):
    root = tmp_path / "plain"
    _write(root / ".gitignore", "skip.py\n")
    _write(root / "skip.py")
    _write(root / "take.py")
    assert git_files.project_files(root) is None
    assert _files(root) == ["take.py"]


def test_explicit_files_and_folders_are_not_listed_twice(tmp_path):
    root = _repo(tmp_path / "r")
    _write(root / "a.py")
    _write(root / "sub" / "b.py")
    assert _found(root, root / "sub" / "b.py", root, root / "sub") == [("file", "sub/b.py"), ("file", "a.py")]
    assert all(not isinstance(i, Skip) for i in discover(root, [root], None))


def test_a_folder_git_ignores_is_walked_when_asked_for(tmp_path):
    """An sdist unpacked under an ignored folder of another repository is still a project of its own."""
    outer = _repo(tmp_path / "outer")
    _write(outer / ".gitignore", "third_party/\n")
    _write(outer / "own.py")
    pkg = outer / "third_party" / "pkg"
    _write(pkg / "pyproject.toml", "[project]\nname = 'pkg'\n")
    _write(pkg / "a.py")
    _write(pkg / ".gitignore", "gen_*.py\n")
    _write(pkg / "gen_x.py")
    assert _files(outer) == ["own.py"]
    assert _files(pkg) == ["a.py", "pyproject.toml"]  # its own .gitignore still counts
    assert {f.path for f in api.scan([pkg], use_cache=False).findings} == {"a.py"}


@pytest.mark.parametrize("in_git", [True, False])
def test_dangling_symlink_inside_the_root_is_a_skip_not_an_error(tmp_path, in_git):
    """issue 39: a broken link inside the root was a MIG002 read error, and `fix --check` exited 2 for ever."""
    from click.testing import CliRunner

    from migrator.cli import main

    root = _repo(tmp_path / "r") if in_git else tmp_path / "r"
    _write(root / "clean.py", "import os\n")
    (root / "pyproject.toml").write_text("")
    os.symlink(root / "gone.py", root / "dangling.py")
    os.symlink(tmp_path / "nowhere.py", root / "away.py")
    found = _found(root)
    assert (f"dangling symlink (to {root / 'gone.py'})", "dangling.py") in found
    assert (f"dangling symlink (to {tmp_path / 'nowhere.py'})", "away.py") in found
    assert not [f for f in api.scan([root], root=root, use_cache=False).findings if f.code == "MIG002"]
    result = CliRunner().invoke(main, ["fix", str(root), "--check", "--no-cache", "--no-record"], catch_exceptions=False)
    assert result.exit_code == 0, result.output
