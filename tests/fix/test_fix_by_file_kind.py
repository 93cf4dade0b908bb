"""The writer decides by what a file is, never by where it is: a tree under /dev/shm is fixed like any
other (issue 38: every fixed file there became the original followed by the fixed text), and a
replaced file keeps its mode bits, ACLs and extended attributes, or is refused for that file."""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from migrator import api
from migrator.ground.safe_write import UnsafeWrite, write_text
from tests.conftest import run_cli

CUDA = "import torch\nx = y.cuda()\n"
SHM = Path("/dev/shm")


def _tree(root: Path) -> Path:
    root.mkdir()
    (root / "pyproject.toml").write_text("[project]\nname='x'\n")
    (root / "a.py").write_text(CUDA)
    return root


@pytest.fixture
def shm_dir() -> Iterator[Path]:
    if not SHM.is_dir() or not os.access(SHM, os.W_OK):
        pytest.skip("no writable /dev/shm on this machine")
    folder = SHM / f"migrate-test-{uuid.uuid4().hex}"
    folder.mkdir()
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def test_a_tree_under_dev_shm_is_fixed_once_not_appended_to(shm_dir):
    repo = _tree(shm_dir / "repo")
    api.fix([repo], use_cache=False)
    fixed = (repo / "a.py").read_text()
    assert "y.npu()" in fixed and ".cuda()" not in fixed
    api.fix([repo], use_cache=False)
    assert (repo / "a.py").read_text() == fixed
    json.loads((repo / ".migrate" / "fix-record.json").read_text())  # one document, not two glued


def test_scan_output_under_dev_shm_twice_is_one_document(shm_dir, tmp_path):
    repo = _tree(tmp_path / "repo")
    out = shm_dir / "x.json"
    for _ in range(2):
        proc = run_cli("scan", str(repo), "--format", "json", "-o", str(out), "--no-cache")
        assert proc.returncode == 1, proc.stderr
    assert json.loads(out.read_text())["findings"]
    assert stat.S_ISREG(os.lstat(out).st_mode)


def test_fix_out_under_dev_shm_holds_the_fixed_text_once(shm_dir, tmp_path):
    repo = _tree(tmp_path / "repo")
    out = shm_dir / "copy"
    api.fix([repo], out_dir=out, use_cache=False)
    text = (out / "a.py").read_text()
    assert "y.npu()" in text and ".cuda()" not in text and text.count("import torch\n") == 1
    assert (repo / "a.py").read_text() == CUDA


def test_a_regular_file_reached_through_dev_prefix_link_is_replaced(shm_dir, tmp_path):
    """Any link chain through /dev that ends at a regular file: atomic replace, not an append."""
    target = shm_dir / "out.txt"
    target.write_text("old\n")
    link = tmp_path / "link.txt"
    link.symlink_to(target)
    write_text(link, "new\n")
    assert target.read_text() == "new\n" and link.is_symlink()


def _have(tool: str) -> None:
    if shutil.which(tool) is None:
        pytest.skip(f"`{tool}` is not installed (apt-get install acl attr); .ci/run installs it")


def test_acl_and_extended_attributes_are_kept(tmp_path):
    _have("setfacl")
    _have("setfattr")
    repo = _tree(tmp_path / "repo")
    path = repo / "a.py"
    try:
        subprocess.run(["setfacl", "-m", "u:12345:---,g:23456:r", str(path)], check=True, capture_output=True)
        subprocess.run(["setfattr", "-n", "user.origin", "-v", "kept", str(path)], check=True, capture_output=True)
    except subprocess.CalledProcessError as exc:
        pytest.skip(f"this filesystem takes no ACL or user attribute: {exc.stderr.decode(errors='replace')}")
    acl_before = subprocess.run(["getfacl", "-c", str(path)], check=True, capture_output=True, text=True).stdout
    api.fix([repo], use_cache=False)
    assert "y.npu()" in path.read_text()
    acl_after = subprocess.run(["getfacl", "-c", str(path)], check=True, capture_output=True, text=True).stdout
    assert acl_after == acl_before and "user:12345:---" in acl_after
    assert os.getxattr(path, "user.origin") == b"kept"


def test_no_acl_inherited_by_the_temp_file_is_added(tmp_path):
    _have("setfacl")
    repo = _tree(tmp_path / "repo")
    subprocess.run(["setfacl", "-m", "u:12345:rwx", str(repo / "a.py")], check=True)
    subprocess.run(["setfacl", "-b", str(repo / "a.py")], check=True)
    try:
        subprocess.run(["setfacl", "-d", "-m", "u:12345:rwx", str(repo)], check=True, capture_output=True)
    except subprocess.CalledProcessError:
        pytest.skip("this filesystem takes no default ACL")
    api.fix([repo], use_cache=False)
    assert "system.posix_acl_access" not in os.listxattr(repo / "a.py")


@pytest.mark.parametrize("bits", [0o2755, 0o4755, 0o6750])
def test_setuid_and_setgid_bits_are_kept(tmp_path, bits):
    repo = _tree(tmp_path / "repo")
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        os.chown(repo / "a.py", 12345, 23456)
    os.chmod(repo / "a.py", bits)
    if stat.S_IMODE(os.stat(repo / "a.py").st_mode) != bits:
        pytest.skip("this user cannot set those bits here")
    api.fix([repo], use_cache=False)
    assert "y.npu()" in (repo / "a.py").read_text()
    assert stat.S_IMODE(os.stat(repo / "a.py").st_mode) == bits


def test_a_file_with_another_hard_link_is_refused_for_that_file(tmp_path):
    repo = _tree(tmp_path / "repo")
    (repo / "b.py").write_text(CUDA)
    outside = tmp_path / "elsewhere.py"
    os.link(repo / "a.py", outside)
    outcome = api.fix([repo], use_cache=False)
    assert (repo / "a.py").read_text() == CUDA and outside.read_text() == CUDA
    assert os.stat(outside).st_ino == os.stat(repo / "a.py").st_ino  # the link not split
    assert "y.npu()" in (repo / "b.py").read_text()  # the others are fixed
    record = json.loads((repo / ".migrate" / "fix-record.json").read_text())
    assert "a.py" not in {f["path"] for f in record["files"]}
    assert any(e["path"] == "a.py" and "hard links" in e["error"] for e in record["errors"]), record
    assert outcome is not None


def test_hard_link_refusal_in_the_writer(tmp_path):
    one, two = tmp_path / "one", tmp_path / "two"
    one.write_text("x")
    os.link(one, two)
    with pytest.raises(UnsafeWrite, match="hard links"):
        write_text(one, "y")
    assert two.read_text() == "x"
