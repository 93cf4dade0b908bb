"""With the cache on, the parent reads each file once for its digest and hands the bytes to the scan; it holds
them a window at a time (`runner.WINDOW_BYTES`), so memory is bounded per window, not per tree, and the
result is the same whatever the window."""

from __future__ import annotations

from pathlib import Path

import pytest

from migrator import api
from migrator.engine import runner


def _tree(root: Path) -> None:
    for i in range(60):
        padding = "# pad\n" * ((i * 7) % 13)
        (root / f"m{i:02}.py").write_text(f"import torch\n{padding}torch.cuda.set_device({i})\nx{i}.cuda()\n")


def _findings(result) -> list[tuple[str, str, int]]:
    return [(f.path, f.code, f.line) for f in result.findings]


@pytest.mark.parametrize("jobs", [1, 2])
def test_small_windows_give_the_same_findings_and_hold_one_window(tmp_path: Path, monkeypatch, jobs) -> None:
    _tree(tmp_path)
    whole = api.scan([tmp_path], use_cache=False, jobs=1)
    assert len(whole.findings) == 120
    held: list[int] = []
    real = runner._windows

    def spied(*args, **kwargs):
        for window, last in real(*args, **kwargs):
            held.append(sum(len(data or b"") for _, _, data in window))
            yield window, last

    monkeypatch.setattr(runner, "WINDOW_BYTES", 400)
    monkeypatch.setattr(runner, "_windows", spied)
    windowed = api.scan([tmp_path], use_cache=True, jobs=jobs)
    assert _findings(windowed) == _findings(whole)
    largest = max(p.stat().st_size for p in tmp_path.glob("*.py"))
    assert len(held) > 5 and max(held) < 400 + largest  # a window closes once it holds WINDOW_BYTES
    held.clear()
    again = api.scan([tmp_path], use_cache=True, jobs=jobs)  # every file a cache hit: nothing held
    assert _findings(again) == _findings(whole) and held == [0]
