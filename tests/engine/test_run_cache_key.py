"""A run makes its cache key (which reads and hashes the coverage tables, a megabyte) only where results are kept
under it: the disk cache, or the memo a command's scans share (`fix`'s rescan). A `--no-cache` scan makes none and
finds the same."""

from __future__ import annotations

from pathlib import Path

import pytest

from migrator import api
from migrator.engine import runner


def test_the_cache_key_is_made_only_where_results_are_kept_under_it(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "train.py").write_text("import torch\nx = torch.zeros(3).cuda()\n")
    (tmp_path / "plain.py").write_text("import os\n")
    made: list[str] = []
    real = runner._cache_key

    def spied(*args, **kwargs) -> str:
        made.append(real(*args, **kwargs))
        return made[-1]

    monkeypatch.setattr(runner, "_cache_key", spied)
    uncached = api.scan([tmp_path], use_cache=False, jobs=1)
    assert made == []
    cached = api.scan([tmp_path], use_cache=True, jobs=1)
    assert len(made) == 1
    assert uncached.findings and uncached.findings == cached.findings
    memo: runner.ScanMemo = {}
    settings, options, paths = _settings_and_options(tmp_path)
    first = runner.run(settings, paths, options, memo=memo)
    assert len(made) == 2 and list(memo) == [made[-1]] and len(memo[made[-1]]) == 2  # the memo keeps results by it
    again = runner.run(settings, paths, options, memo=memo)
    assert again.files == first.files


def _settings_and_options(root: Path):
    from migrator.pipeline.options import resolve_settings, scan_options

    settings, paths = resolve_settings([root], root, use_cache=False, jobs=1)
    return settings, scan_options(settings), paths
