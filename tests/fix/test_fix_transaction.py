"""A fix run is a transaction over the tree: every file is planned (fixed, re-parsed, encoded) before
any is written; one bad file is an error of that file only; links are never replaced, nothing is
written outside the root, owners are kept and a killed run's temporary files are swept."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from migrator import api
from migrator.fix import python_fixer, transaction

CUDA = "import torch\nx = y.cuda()\n"

# `.npu()` exists once torch_npu is imported: fix adds it (with the noqa that keeps linters off it)
FIXED = 'import torch\nimport torch_npu  # noqa: F401  registers the Ascend "npu" device\nx = y.npu()\n'


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    root.mkdir()
    (root / "pyproject.toml").write_text("[project]\nname='x'\n")
    for name in ("a.py", "zz.py"):
        (root / name).write_text(CUDA)
    return root


def record(root: Path) -> dict:
    return json.loads((root / ".migrate" / "fix-record.json").read_text())


def test_annotating_a_latin1_file_fixes_every_file(repo):
    latin = repo / "m.py"
    latin.write_bytes('# -*- coding: latin-1 -*-\nimport torch\ns = "café"\nt = torch.randn(3).double()\nx = y.cuda()\n'
                      .encode("latin-1"))
    outcome = api.fix([repo], annotate=True, use_cache=False)
    assert outcome.errors == []
    text = latin.read_bytes().decode("latin-1")
    assert "café" in text and "x = y.npu()" in text and "# MIGRATE(OPS006): float64" in text
    assert all((repo / n).read_text() == FIXED for n in ("a.py", "zz.py"))
    assert {f["path"] for f in record(repo)["files"]} == {"a.py", "m.py", "zz.py"}


def test_an_encoding_failure_is_a_planning_error_of_that_file(repo, monkeypatch):
    latin = repo / "m.py"
    original = '# -*- coding: latin-1 -*-\nimport torch\nx = y.cuda()\n'.encode("latin-1")
    latin.write_bytes(original)
    real = python_fixer.fix_python

    def em_dash(text, *args, **kwargs):
        result = real(text, *args, **kwargs)
        return python_fixer.PythonFixResult(result.text + ("# —\n" if "latin-1" in text else ""),
                                            result.applied, result.declined)

    monkeypatch.setattr(python_fixer, "fix_python", em_dash)
    outcome = api.fix([repo], use_cache=False)
    assert [p for p, _ in outcome.errors] == ["m.py"]
    assert "encoding" in outcome.errors[0][1] and "U+2014" in outcome.errors[0][1]
    assert latin.read_bytes() == original
    assert all("y.npu()" in (repo / n).read_text() for n in ("a.py", "zz.py"))  # files after it too
    r = record(repo)
    assert {f["path"] for f in r["files"]} == {"a.py", "zz.py"}
    assert [e["path"] for e in r["errors"]] == ["m.py"]


def test_a_write_failure_is_an_error_of_that_file_only(repo, monkeypatch):
    real = transaction.atomic_write

    def refuse(path, data, **kw):
        if path.name == "a.py":
            raise PermissionError(13, "Permission denied", str(path))
        real(path, data, **kw)

    monkeypatch.setattr(transaction, "atomic_write", refuse)
    outcome = api.fix([repo], use_cache=False)
    assert outcome.errors == [("a.py", "cannot write: Permission denied; file left unchanged")]
    assert (repo / "a.py").read_text() == CUDA and "y.npu()" in (repo / "zz.py").read_text()
    assert outcome.changed_files == ["zz.py"]
    assert [f["path"] for f in record(repo)["files"]] == ["zz.py"]


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() == 0, reason="root may write anywhere")
def test_an_unwritable_folder_is_reported_and_the_rest_is_written(repo):
    (repo / "ro").mkdir()
    (repo / "ro" / "r.py").write_text(CUDA)
    (repo / "ro").chmod(0o555)
    try:
        outcome = api.fix([repo], use_cache=False)
    finally:
        (repo / "ro").chmod(0o755)
    assert [p for p, _ in outcome.errors] == ["ro/r.py"]
    assert (repo / "ro" / "r.py").read_text() == CUDA and "y.npu()" in (repo / "zz.py").read_text()
    assert "ro/r.py" not in {f["path"] for f in record(repo)["files"]}


def test_cli_annotate_latin1_does_not_stop_the_run(repo):
    from tests.conftest import run_cli

    (repo / "m.py").write_bytes(b"# -*- coding: latin-1 -*-\nimport torch\nt = torch.randn(3).double()\n")
    proc = run_cli("fix", str(repo), "--annotate", "--no-cache")
    assert proc.returncode == 1 and "error" not in proc.stderr, proc.stderr  # OPS006 remains: a warning
    assert (repo / ".migrate" / "fix-record.json").is_file()
    assert all("y.npu()" in (repo / n).read_text() for n in ("a.py", "zz.py"))


def test_a_symlink_inside_the_root_stays_a_link_and_its_target_is_fixed_once(repo):
    (repo / "link.py").symlink_to("a.py")
    (repo / "sub").mkdir()
    (repo / "sub" / "other.py").symlink_to("../a.py")
    outcome = api.fix([repo], use_cache=False)
    assert outcome.errors == []
    assert (repo / "link.py").is_symlink() and os.readlink(repo / "link.py") == "a.py"
    assert (repo / "sub" / "other.py").is_symlink()
    assert (repo / "a.py").read_text() == FIXED
    files = record(repo)["files"]
    assert [f["path"] for f in files] == ["a.py", "zz.py"] and len(files[0]["edits"]) == 1


def test_a_link_whose_target_is_not_scanned_fixes_the_target(repo):
    (repo / "vendor").mkdir()
    (repo / "vendor" / "t.txt").write_text(CUDA)
    (repo / "t.py").symlink_to("vendor/t.txt")
    api.fix([repo], use_cache=False)
    assert (repo / "t.py").is_symlink() and "y.npu()" in (repo / "vendor" / "t.txt").read_text()
    assert "vendor/t.txt" in {f["path"] for f in record(repo)["files"]}


def test_nothing_is_written_outside_the_root(repo, tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "o.py").write_text(CUDA)
    (repo / "ext.py").symlink_to(outside / "o.py")
    (repo / "extdir").symlink_to(outside)
    given = [repo, repo / "ext.py", outside / "o.py", repo / "extdir" / "o.py"]
    outcome = api.fix(given, root=repo, use_cache=False)
    assert (outside / "o.py").read_text() == CUDA and (repo / "ext.py").is_symlink()
    assert any("outside the root" in why for _, why in outcome.errors)
    assert all(not Path(f["path"]).is_absolute() for f in record(repo)["files"])


def test_a_symlinked_migrate_folder_is_refused_before_anything_is_written(repo, tmp_path):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (repo / ".migrate").symlink_to(elsewhere)
    with pytest.raises(api.UsageError, match="symlink"):
        api.fix([repo], use_cache=False)
    assert list(elsewhere.iterdir()) == [] and (repo / "a.py").read_text() == CUDA
    assert api.fix([repo], record=False, use_cache=False).errors == []  # --no-record still works
    assert list(elsewhere.iterdir()) == []


def test_a_symlinked_record_is_refused(repo, tmp_path):
    (repo / ".migrate").mkdir()
    (tmp_path / "r.json").write_text("{}")
    (repo / ".migrate" / "fix-record.json").symlink_to(tmp_path / "r.json")
    with pytest.raises(api.UsageError, match="symlink"):
        api.fix([repo], use_cache=False)
    assert (tmp_path / "r.json").read_text() == "{}"


def test_cli_symlinked_migrate_folder_exit_2(repo, tmp_path):
    from tests.conftest import run_cli

    (repo / ".migrate").symlink_to(tmp_path)
    proc = run_cli("fix", str(repo), "--no-cache")
    assert proc.returncode == 2 and ".migrate: is a symlink" in proc.stderr
    assert (repo / "a.py").read_text() == CUDA


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0, reason="only root can give files away")
def test_owner_and_group_are_kept(repo):
    os.chown(repo / "a.py", 12345, 23456)
    api.fix([repo], use_cache=False)
    st = (repo / "a.py").stat()
    assert "y.npu()" in (repo / "a.py").read_text()
    assert (st.st_uid, st.st_gid) == (12345, 23456)


def test_stale_temp_files_of_the_tool_are_swept_and_nothing_else(repo):
    (repo / ".migrate").mkdir()
    stale = [repo / ".a.py.k2j4x_9q.migrate-tmp", repo / ".migrate" / ".fix-record.json.abcdefgh.migrate-tmp"]
    keep = [repo / "notes.migrate-tmp", repo / ".a.py.short.migrate-tmp", repo / ".a.py.k2j4x_9q.tmp"]
    for path in stale + keep:
        path.write_text("x")
    assert api.fix([repo], write=False, use_cache=False).changed_files  # a dry run deletes nothing
    assert all(p.exists() for p in stale)
    api.fix([repo / "zz.py"], root=repo, use_cache=False)
    assert not any(p.exists() for p in stale) and all(p.exists() for p in keep)


def _reaped_pid() -> int:
    import subprocess
    import sys

    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()  # reaped: the pid names no process now
    return child.pid


@pytest.mark.parametrize("record", [False, True])
def test_a_sweep_keeps_temps_whose_writer_is_alive(repo, record):
    """issue 38: `fix --no-record` (the hook's mode, no lock) swept a concurrent fix's live temp files."""
    import fcntl

    live = repo / f".a.py.{os.getpid()}-k2j4x_9q.migrate-tmp"  # this test process is the writer
    dead = repo / f".a.py.{_reaped_pid()}-abcdefgh.migrate-tmp"
    locked = repo / f".b.py.{_reaped_pid()}-abcdefgh.migrate-tmp"  # pid not seen here (another namespace) but locked
    unstamped = repo / ".c.py.k2j4x_9q.migrate-tmp"  # an older version's: only a run holding the tree's lock sweeps it
    for path in (live, dead, locked, unstamped):
        path.write_text("x")
    with open(locked, "rb") as held:
        fcntl.flock(held.fileno(), fcntl.LOCK_EX)
        api.fix([repo / "zz.py"], root=repo, use_cache=False, record=record)
    assert live.exists() and locked.exists() and not dead.exists()
    assert unstamped.exists() is (not record)


def test_the_writer_stamps_and_locks_its_temp(repo):
    import fcntl

    from migrator.ground.safe_write import TEMP_NAME, temp_writer_gone, write_bytes

    seen = []

    def look() -> None:
        (temp,) = repo.glob(".out.txt.*.migrate-tmp")
        seen.append((TEMP_NAME.match(temp.name)["pid"], temp_writer_gone(temp, unstamped_gone=True)))
        with open(temp, "rb") as fh, pytest.raises(BlockingIOError):
            fcntl.flock(fh.fileno(), fcntl.LOCK_SH | fcntl.LOCK_NB)

    write_bytes(repo / "out.txt", b"data", before_replace=look)
    assert seen == [(str(os.getpid()), False)] and (repo / "out.txt").read_bytes() == b"data"


def test_new_record_is_readable_by_others(repo):
    umask = os.umask(0o022)
    try:
        api.fix([repo], use_cache=False)
    finally:
        os.umask(umask)
    assert (repo / ".migrate" / "fix-record.json").stat().st_mode & 0o777 == 0o644


def test_declines_through_a_link_survive_a_rerun(repo):
    (repo / "attn.py").write_text("from flash_attn import flash_attn_func\no = flash_attn_func(q, k, v, window_size=(1, 1))\n")
    (repo / "alias.py").symlink_to("attn.py")
    api.fix([repo], use_cache=False)
    first = sorted(d["path"] for d in record(repo)["declined"])
    assert "alias.py" in first and "attn.py" in first
    api.fix([repo], use_cache=False)
    assert sorted(d["path"] for d in record(repo)["declined"]) == first


def test_a_killed_run_leaves_no_temp_files_after_the_next(repo):
    import signal
    import subprocess
    import sys

    from tests.conftest import REPO

    child = (
        "import os, signal, sys\n"
        "from migrator import api\n"
        "os.replace = lambda *a: os.kill(os.getpid(), signal.SIGKILL)  # dies mid-write, temp file written\n"
        "api.fix([sys.argv[1]], use_cache=False)\n"
    )
    proc = subprocess.run([sys.executable, "-c", child, str(repo)], cwd=REPO, capture_output=True, timeout=300,
                          env={**os.environ, "PYTHONPATH": str(REPO)})
    assert proc.returncode == -signal.SIGKILL
    assert list(repo.rglob("*.migrate-tmp")) and (repo / "a.py").read_text() == CUDA
    api.fix([repo], use_cache=False)
    assert list(repo.rglob("*.migrate-tmp")) == [] and "y.npu()" in (repo / "a.py").read_text()


@pytest.mark.parametrize("text", ["import torch\nx = y.cuda()\n\r", "import torch\r\nx = y.cuda()\r\n\r",
                                  "import torch\nx = y.cuda()\r", "import torch\rx = y.cuda()\r"])
def test_a_final_lone_cr_is_kept(repo, text):
    """issue 38: the fix dropped a file's final lone `\\r` (libcst does)."""
    (repo / "a.py").write_bytes(text.encode())
    api.fix([repo / "a.py"], root=repo, use_cache=False)
    data = (repo / "a.py").read_bytes()
    assert data.endswith(b"y.npu()" + text.split("y.cuda()")[1].encode())  # the same bytes after the last site


def test_a_record_path_with_a_nul_byte_is_refused_before_any_write(repo):
    """issue 38: such a record was an internal error after a file had been rewritten."""
    from migrator.api import UsageError

    api.fix([repo / "a.py"], root=repo, use_cache=False)
    path = repo / ".migrate" / "fix-record.json"
    data = json.loads(path.read_text())
    data["files"][0]["path"] = "a\u0000.py"
    path.write_text(json.dumps(data))
    with pytest.raises(UsageError, match=r"\$\.files\[0\]\.path: a path holding a NUL byte"):
        api.fix([repo / "zz.py"], root=repo, use_cache=False)
    assert (repo / "zz.py").read_text() == CUDA



def test_a_folder_that_cannot_be_made_is_not_blamed_on_a_journal(repo: Path, monkeypatch):
    """issue 38 (bench/fault_hunt.py): as a user who may not write the tree, fix said "cannot complete the
    interrupted fix's record" though no fix was ever interrupted; the folder it could not make is named."""
    from migrator.fix import journal
    from migrator.ground.usage_error import UsageError

    def denied(path: Path) -> None:
        raise PermissionError(13, "Permission denied", str(path))

    monkeypatch.setattr(journal, "ensure_folder", denied)
    before = {p: p.read_bytes() for p in repo.rglob("*.py")}
    with pytest.raises(UsageError) as err:
        api.fix([repo], use_cache=False)
    assert ".migrate: cannot take the fix lock (Permission denied)" in str(err.value)
    assert "interrupted" not in str(err.value)
    assert {p: p.read_bytes() for p in repo.rglob("*.py")} == before
