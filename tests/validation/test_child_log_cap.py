"""A validated program's output is capped on disk, head and tail kept (issue 38: a program printing without
end filled TMPDIR with 12 GB in 8 s)."""

from __future__ import annotations

import os
from pathlib import Path

from migrator.validation.parent import capped_log, launcher
from migrator.validation.records import Job, Status

NOISY = ("import sys\n"
         "sys.stdout.write('HEAD-LINE\\n' + 'a' * 3_000_000)\n"
         "sys.stderr.write('b' * 3_000_000)\n"  # stderr goes to the same log
         "sys.stdout.write('c' * 1_000 + 'LAST-LINE\\n')\n")


def test_a_childs_log_keeps_head_and_tail_within_the_cap(tmp_path: Path, monkeypatch):
    monkeypatch.setattr(capped_log, "LOG_LIMIT_BYTES", 64 * 1024)
    (tmp_path / "noisy_program.py").write_text(NOISY)
    env = launcher.child_env(0, 1, {"PYTHONPATH": str(tmp_path), "MIGRATE_VALIDATE_WARM": "0"})
    child = launcher.start(Job(tree=str(tmp_path), out=str(tmp_path / "out")), "noisy", env, timeout=60,
                           module="noisy_program")
    result = launcher.wait(child, Status)
    data = Path(child.log).read_bytes()
    assert result.returncode == 0
    assert len(data) < 64 * 1024 + 200  # the cap and the note saying what was left out
    assert data.startswith(b"HEAD-LINE\n") and data.endswith(b"LAST-LINE\n")
    assert b"bytes of output left out here" in data and "LAST-LINE" in result.log_tail


def test_a_short_log_is_kept_whole(tmp_path: Path):
    sink = capped_log.CappedLog(str(tmp_path / "log.txt"), limit=1024)
    os.write(sink.fd, b"x" * 1000)
    sink.started()
    sink.close()
    assert (tmp_path / "log.txt").read_bytes() == b"x" * 1000
