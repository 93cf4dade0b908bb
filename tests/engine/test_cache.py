"""The scan cache folder: platformdirs' user cache path, pruning of old files, `migrate cache clean`."""

from __future__ import annotations

import os
import time

from click.testing import CliRunner

from migrator.engine import cache


def test_cache_dir_is_the_user_cache_path(monkeypatch, tmp_path):
    monkeypatch.delenv("MIGRATE_CACHE_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    from platformdirs import user_cache_path

    assert cache.cache_dir() == user_cache_path("ascend-migrate", appauthor=False) / "scan"
    monkeypatch.setenv("MIGRATE_CACHE_DIR", str(tmp_path / "explicit"))
    assert cache.cache_dir() == tmp_path / "explicit"


def test_prune_removes_only_old_cache_files(tmp_path):
    old, new, other = tmp_path / "old.pickle", tmp_path / "new.pickle", tmp_path / "notes.txt"
    for path in (old, new, other):
        path.write_bytes(b"x")
    month_ago = time.time() - 31 * 86400
    os.utime(old, (month_ago, month_ago))
    os.utime(other, (month_ago, month_ago))
    assert cache.prune(tmp_path) == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["new.pickle", "notes.txt"]


def test_saving_prunes_the_folder(monkeypatch, tmp_path):
    monkeypatch.setenv("MIGRATE_CACHE_DIR", str(tmp_path))
    stale = tmp_path / "stale.pickle"
    stale.write_bytes(b"x")
    os.utime(stale, (0, 0))
    scan_cache = cache.ScanCache(tmp_path, "key")
    scan_cache.dirty = True
    scan_cache.save()
    assert not stale.exists() and scan_cache.path.exists()


def test_cache_clean_command(monkeypatch, tmp_path):
    from migrator.cli import main

    monkeypatch.setenv("MIGRATE_CACHE_DIR", str(tmp_path))
    (tmp_path / "a.pickle").write_bytes(b"12345")
    (tmp_path / "keep.txt").write_text("not ours")
    result = CliRunner().invoke(main, ["cache", "clean"])
    assert result.exit_code == 0, result.output
    assert f"removed 1 cache file(s), 5 bytes, from {tmp_path}" in result.output
    assert [p.name for p in tmp_path.iterdir()] == ["keep.txt"]


def test_each_file_is_read_once_with_the_cache_on(monkeypatch, tmp_path):
    """The parent reads a file for its digest; the worker scans those bytes instead of reading it again."""
    from collections import Counter

    from migrator.cli import main
    from migrator.ground import input_files

    monkeypatch.setenv("MIGRATE_CACHE_DIR", str(tmp_path / "cache"))
    project = tmp_path / "project"
    project.mkdir()
    (project / "pyproject.toml").write_text('[project]\nname = "p"\nversion = "0"\n')
    for name in ("a.py", "b.py", "c.py"):
        (project / name).write_text("import torch\nx = torch.zeros(1).cuda()\n")
    reads: Counter[str] = Counter()
    real = input_files.read_bytes

    def counting(path, *args, **kwargs):
        reads[os.path.basename(path)] += 1
        return real(path, *args, **kwargs)

    monkeypatch.setattr(input_files, "read_bytes", counting)
    result = CliRunner().invoke(main, ["scan", str(project), "--root", str(project), "-j", "1", "--route", "none",
                                       "--exit-zero", "-q"])
    assert result.exit_code == 0, result.output
    assert "cuda" in result.output
    assert {name: reads[name] for name in ("a.py", "b.py", "c.py")} == {"a.py": 1, "b.py": 1, "c.py": 1}
