"""Issue 38's permission cases run as tests too, as root and as the unprivileged user `nobody`: the same
cases `bench/fault_hunt.py` prints (ACLs, extended attributes and setgid kept; a folder the user may not
write and a file the user may not read named, never a traceback; the other files fixed)."""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.conftest import REPO

sys.path.insert(0, str(REPO / "bench"))
import fault_hunt_issue  # noqa: E402
import fault_hunt_kit  # noqa: E402
import fault_hunt_new  # noqa: E402

CASES: dict[str, Callable[[Path], fault_hunt_kit.Result]] = {
    "acl-xattr-setgid-root": fault_hunt_issue.acl_xattr_setgid_root,
    "acl-xattr-setgid-user": fault_hunt_issue.acl_xattr_setgid_user,
    "readonly-folder-root": fault_hunt_new.readonly_folder_root,
    "readonly-folder-user": fault_hunt_new.readonly_folder_user,
    "unreadable-file-user": fault_hunt_new.unreadable_file_user,
}


@pytest.fixture
def case_dir() -> Iterator[Path]:
    if os.geteuid() != 0:
        pytest.skip("these cases chown files to another user: run as root (CI does)")
    tmp = Path(tempfile.mkdtemp(prefix="fault-case-"))  # not under pytest's 0700 folder: nobody must reach it
    try:
        yield tmp
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


@pytest.mark.parametrize("name", sorted(CASES))
def test_permission_case_has_no_violation(case_dir: Path, name: str):
    try:
        result = CASES[name](case_dir)
    except fault_hunt_kit.Skip as exc:
        pytest.skip(f"{name}: {exc}")
    assert result.violations == [], (name, result.violations, result.note)
