"""`-o` onto something that is not a regular file: the output is written and the target stays what it
was (as root, renaming a temp file over /dev/null destroys the machine's /dev/null). Regular files and
new paths are still replaced atomically, through a symlink to its target."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from migrator.ground.safe_write import UnsafeWrite, write_bytes, write_text
from tests.conftest import REPO

CUDA = "import torch\nx = torch.zeros(2).cuda()\n"


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "demo"\n')
    (tmp_path / "train.py").write_text(CUDA)
    return tmp_path


def _scan_to(project: Path, target: str, stdout=subprocess.PIPE) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(REPO), "MIGRATE_CACHE_DIR": str(project / ".cache-test")}
    return subprocess.run([sys.executable, "-m", "migrator", "scan", str(project), "--format", "json", "-o", target],
                          cwd=project, env=env, stdout=stdout, stderr=subprocess.PIPE, timeout=120, check=False)


@pytest.fixture
def null_device(tmp_path: Path) -> Path:
    """A character device of our own, the same as /dev/null (1, 3): a broken writer must never be
    tested on the machine's /dev/null (conftest fails the run if that stops being a device)."""
    node = tmp_path / "null"
    try:
        os.mknod(node, stat.S_IFCHR | 0o666, os.makedev(1, 3))
    except (PermissionError, AttributeError):
        pytest.skip("making a device node needs root (the case that matters: renaming over it needs root too)")
    return node


def test_a_character_device_stays_one(project, null_device):
    before = os.lstat(null_device)
    result = _scan_to(project, str(null_device))
    assert result.returncode == 1, result.stderr  # findings
    after = os.lstat(null_device)
    assert stat.S_ISCHR(after.st_mode) and after.st_rdev == before.st_rdev and after.st_ino == before.st_ino
    assert sorted(p.name for p in null_device.parent.iterdir() if p.name.startswith(".null")) == []  # no temp file


@pytest.fixture
def stdout_link(tmp_path: Path) -> Path:
    """What /dev/stdout is (a link to /proc/self/fd/1), made here so that /dev is never written to."""
    if not os.path.exists("/proc/self/fd/1"):
        pytest.skip("needs /proc")
    link = tmp_path / "stdout"
    link.symlink_to("/proc/self/fd/1")
    return link


@pytest.mark.parametrize("target", ["stdout-link", "-"])
def test_stdout_gets_the_output(project, stdout_link, target):
    result = _scan_to(project, str(stdout_link) if target == "stdout-link" else target)
    assert result.returncode == 1, result.stderr
    assert json.loads(result.stdout)["findings"]
    assert stdout_link.is_symlink() and os.readlink(stdout_link) == "/proc/self/fd/1"


def test_stdout_redirected_to_a_file_is_appended_to(project, stdout_link, tmp_path):
    out = tmp_path / "log.txt"
    out.write_text("kept\n")
    with open(out, "ab") as fh:
        result = _scan_to(project, str(stdout_link), stdout=fh)
    assert result.returncode == 1, result.stderr
    text = out.read_text()
    assert text.startswith("kept\n") and '"findings"' in text
    assert stdout_link.is_symlink()


def test_fifo_is_written_and_stays_a_fifo(tmp_path):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    got: list[bytes] = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_bytes()), daemon=True)
    reader.start()
    write_text(fifo, "report\n")
    reader.join(10)
    assert got == [b"report\n"]
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)


def test_a_link_to_a_device_is_written_through(tmp_path, null_device):
    link = tmp_path / "out.json"
    link.symlink_to(null_device)
    write_text(link, "x")
    assert link.is_symlink() and stat.S_ISCHR(os.lstat(null_device).st_mode)


def test_regular_file_replaced_atomically_keeping_mode_and_link(tmp_path):
    real = tmp_path / "real.txt"
    real.write_text("old")
    real.chmod(0o640)
    link = tmp_path / "link.txt"
    link.symlink_to(real)
    write_text(link, "new")
    assert link.is_symlink() and real.read_text() == "new" and stat.S_IMODE(real.stat().st_mode) == 0o640
    assert sorted(p.name for p in tmp_path.iterdir()) == ["link.txt", "real.txt"]  # no temp file left


def test_a_folder_is_refused(tmp_path):
    with pytest.raises(UnsafeWrite, match="is a folder"):
        write_bytes(tmp_path, b"x")


def test_with_a_root_nothing_lands_outside_it(tmp_path):
    root, outside = tmp_path / "root", tmp_path / "outside.txt"
    root.mkdir()
    outside.write_text("theirs")
    (root / "link.txt").symlink_to(outside)
    with pytest.raises(UnsafeWrite, match="outside the root"):
        write_text(root / "link.txt", "ours", root=root)
    (root / "sub").symlink_to(tmp_path)
    with pytest.raises(UnsafeWrite, match="outside the root"):
        write_text(root / "sub" / "new.txt", "ours", root=root)
    assert outside.read_text() == "theirs" and not (tmp_path / "new.txt").exists()
