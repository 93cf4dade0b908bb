"""Faults during `fix`: a SIGKILL at each named point of the transaction, a failed record write
(disk full), a file the user edits, renames or deletes after planning. After recovery every file is
original or fixed and the record matches the files; the user's edit always survives."""

from __future__ import annotations

import errno
import json
import signal
from pathlib import Path

import pytest

from migrator import api
from migrator.fix import journal, ledger, runner
from migrator.fix.writer import sweep_stale_temps
from tests.conftest import run_cli

FILES = {
    "a.py": "import torch\nx = torch.zeros(2).cuda()\n",
    "b.py": "import torch\ny = torch.ones(3).cuda()\nz = y.to('cuda')\n",
    "c.py": "import torch\ntorch.cuda.synchronize()\n",
    "clean.py": "print('no CUDA here')\n",
}


def _tree(root: Path) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "pyproject.toml").write_text('[project]\nname = "x"\n')
    for rel, text in FILES.items():
        (root / rel).write_text(text)
    return root


@pytest.fixture(scope="module")
def fixed(tmp_path_factory) -> dict[str, bytes]:
    """Each file as an undisturbed fix leaves it."""
    root = _tree(tmp_path_factory.mktemp("reference"))
    api.fix([root], use_cache=False)
    return {rel: (root / rel).read_bytes() for rel in FILES}


def _record(root: Path) -> dict:
    path = root / ledger.RECORD_PATH
    return json.loads(path.read_text()) if path.exists() else {"files": []}


def assert_consistent(root: Path, fixed: dict[str, bytes]) -> None:
    """Every file original or fixed; the record lists exactly the fixed ones, with their hashes."""
    state = {}
    for rel, text in FILES.items():
        data = (root / rel).read_bytes()
        assert data in (text.encode(), fixed[rel]), rel
        state[rel] = data
    assert not (root / journal.JOURNAL_PATH).exists()
    entries = {f["path"]: f for f in _record(root)["files"]}
    for rel, data in state.items():
        if data != FILES[rel].encode():
            assert rel in entries and entries[rel]["sha256"] == ledger.sha256(data), rel
            assert entries[rel]["sha256_before"] == ledger.sha256(FILES[rel].encode())
        else:
            assert rel not in entries, rel
    assert not [p for p in root.rglob("*.migrate-tmp")]


@pytest.mark.parametrize("point", ["journal", "file:1", "file:2", "written", "record"])
def test_sigkill_at_each_point_recovers_to_a_matching_record(tmp_path, fixed, point):
    root = _tree(tmp_path / "t")
    result = run_cli("fix", str(root), "--no-cache", "-q", cwd=root, env={"MIGRATE_FAULT_AT": point})
    assert result.returncode == -signal.SIGKILL, result.stderr
    assert (root / journal.JOURNAL_PATH).exists()  # killed before the journal went, at every point
    sweep_stale_temps(root, tree_locked=True)  # what the next `migrate fix` does first
    journal.recover(root)
    assert_consistent(root, fixed)
    api.fix([root], use_cache=False)  # the next run completes the migration
    assert_consistent(root, fixed)
    assert all((root / rel).read_bytes() == fixed[rel] for rel in FILES)


def test_a_failed_record_write_keeps_the_journal_and_the_next_run_records(tmp_path, fixed, monkeypatch):
    root = _tree(tmp_path / "t")
    real = ledger.write_bytes

    def disk_full(path, data, **kw):
        if Path(path).name == "fix-record.json":
            raise OSError(errno.ENOSPC, "No space left on device")
        real(path, data, **kw)

    monkeypatch.setattr(ledger, "write_bytes", disk_full)
    outcome = api.fix([root], use_cache=False)
    assert outcome.record_error and "No space left" in outcome.record_error and journal.JOURNAL_PATH in outcome.record_error
    assert (root / journal.JOURNAL_PATH).exists()  # the edits are not lost
    monkeypatch.setattr(ledger, "write_bytes", real)
    journal.recover(root)
    assert_consistent(root, fixed)


def test_no_file_is_written_when_the_journal_cannot_be(tmp_path, monkeypatch):
    root = _tree(tmp_path / "t")
    real = journal.write_bytes

    def disk_full(path, data, **kw):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(journal, "write_bytes", disk_full)
    outcome = api.fix([root], use_cache=False)
    monkeypatch.setattr(journal, "write_bytes", real)
    assert all((root / rel).read_text() == text for rel, text in FILES.items())
    assert {p for p, _ in outcome.errors} >= {"a.py", "b.py", "c.py"}
    assert all("fix journal could not be written" in why for _, why in outcome.errors)


def test_edits_made_while_fix_runs_survive_reported_per_file(tmp_path, fixed, monkeypatch):
    root = _tree(tmp_path / "t")
    real_plan = runner.plan_fixes

    def plan_then_user_acts(*args, **kwargs):
        plan = real_plan(*args, **kwargs)
        (root / "a.py").write_text("import torch\nx = torch.zeros(2).cuda()  # my edit\n")  # saved meanwhile
        (root / "b.py").rename(root / "b_renamed.py")
        (root / "c.py").unlink()
        return plan

    monkeypatch.setattr(runner, "plan_fixes", plan_then_user_acts)
    outcome = api.fix([root], use_cache=False)
    errors = dict(outcome.errors)
    assert "changed since planned" in errors["a.py"] and "your version is kept" in errors["a.py"]
    assert "not recreated" in errors["b.py"] and "not recreated" in errors["c.py"]
    assert (root / "a.py").read_text().endswith("# my edit\n")
    assert not (root / "b.py").exists() and not (root / "c.py").exists()
    assert (root / "b_renamed.py").read_text() == FILES["b.py"]
    assert _record(root)["files"] == []  # nothing was fixed, nothing recorded
    assert not (root / journal.JOURNAL_PATH).exists()


def test_a_committed_record_is_not_merged_twice(tmp_path, fixed):
    root = _tree(tmp_path / "t")
    api.fix([root], use_cache=False)
    counts = {f["path"]: len(f["edits"]) for f in _record(root)["files"]}
    stale = {"journal_version": journal.VERSION, "record_sha256": "not this record", "run": {"files": []}, "files": []}
    (root / journal.JOURNAL_PATH).write_text(json.dumps(stale))
    assert journal.recover(root) is None
    assert {f["path"]: len(f["edits"]) for f in _record(root)["files"]} == counts
    assert not (root / journal.JOURNAL_PATH).exists()


def test_an_unreadable_journal_is_set_aside(tmp_path):
    root = _tree(tmp_path / "t")
    (root / ".migrate").mkdir()
    (root / journal.JOURNAL_PATH).write_text("{trunc")
    note = journal.recover(root)
    assert note and "set aside" in note
    assert (root / (journal.JOURNAL_PATH + ".unreadable")).exists()
    assert not (root / journal.JOURNAL_PATH).exists()


def test_a_second_fix_on_the_same_tree_is_refused_while_one_writes(tmp_path):
    from migrator.ground.usage_error import UsageError

    root = _tree(tmp_path / "t")
    with journal.exclusive(root):  # as a running `migrate fix` holds it
        with pytest.raises(UsageError, match="another `migrate fix` is writing this tree"):
            api.fix([root], use_cache=False)
    assert all((root / rel).read_text() == text for rel, text in FILES.items())
    api.fix([root], use_cache=False)  # released: the next run goes ahead
    assert "npu" in (root / "a.py").read_text()
