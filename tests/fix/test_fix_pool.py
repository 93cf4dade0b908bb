"""Fixing modules in worker processes gives exactly what fixing them in this process gives."""

from __future__ import annotations

import contextlib
import shutil
from pathlib import Path

import pytest

from migrator import api
from migrator.fix import pool

REPO = Path(__file__).resolve().parents[2]


def _fix(tree: Path, monkeypatch: pytest.MonkeyPatch, parallel: bool, early: bool = False) -> dict[str, object]:
    from migrator.engine import runner

    pools: list[int] = []
    real_pool = runner.worker_pool

    @contextlib.contextmanager
    def counting_pool(workers: int):
        pools.append(workers)
        with real_pool(workers) as started:
            real_map = started.map

            def counted_map(*args, **kwargs):
                pools.append(0)  # the pool was given work
                return real_map(*args, **kwargs)

            started.map = counted_map  # type: ignore[method-assign]
            yield started

    monkeypatch.setattr(runner, "worker_pool", counting_pool)
    if parallel:
        monkeypatch.setattr(pool, "POOL_MIN_BYTES", 0)
        monkeypatch.setattr(pool, "POOL_MIN_FILES", 2)
    if early:
        monkeypatch.setattr(pool, "EARLY_MIN_PYTHON_FILES", 1)
        real_scan = runner.run

        def scan_after_pool(*args, **kwargs):
            pools.append(-1)  # the scan's place among the pools started
            return real_scan(*args, **kwargs)

        monkeypatch.setattr(runner, "run", scan_after_pool)
    outcome = api.fix([tree], write=False, jobs=2 if parallel else 1, use_cache=False)
    monkeypatch.undo()
    # early: the pool started before the scan (-1) is the one that fixes the modules (0), and the only one
    assert pools[:3] == [2, -1, 0] and pools.count(2) == 1 if early else bool(pools) == parallel, pools
    return {c.path: (c.after, [e.code for e in c.edits], [(f.code, why) for f, why in c.declined], c.error)
            for c in outcome.plan.changes}


@pytest.mark.parametrize("sample", ["gpt", "resnet"])
def test_pool_and_serial_plans_agree(sample: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    tree = tmp_path / sample
    shutil.copytree(REPO / "samples" / sample, tree)
    serial = _fix(tree, monkeypatch, parallel=False)
    parallel = _fix(tree, monkeypatch, parallel=True)
    assert serial == parallel
    assert any(edits for _, edits, _, _ in serial.values()), "the sample has nothing to fix: the test proves nothing"


def test_a_pool_started_before_the_scan_fixes_the_modules(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A big tree's workers are forked before the scan (they do not inherit its results) and fix the modules
    as a pool started for them would: one pool, the same plan as in this process."""
    tree = tmp_path / "gpt"
    shutil.copytree(REPO / "samples" / "gpt", tree)
    assert _fix(tree, monkeypatch, parallel=True, early=True) == _fix(tree, monkeypatch, parallel=False)


def test_a_module_the_fixer_raises_on_is_that_module_s_error(monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(*args, **kwargs):
        raise RuntimeError("boom")

    monkeypatch.setattr("migrator.fix.python_fixer.fix_python", broken)
    job = pool.PythonJob("import torch\nx = 1\n", (), "npu", False)
    [outcome] = pool.fix_modules([job], workers=1)
    assert outcome.error is not None and "RuntimeError: boom" in outcome.error
    assert outcome.text == job.text and outcome.applied == []


@pytest.mark.parametrize("raises", [False, True])
def test_a_module_is_fixed_without_the_cycle_collector_which_is_back_after_it(monkeypatch: pytest.MonkeyPatch,
                                                                             raises: bool) -> None:
    import gc

    seen: list[bool] = []

    def recording(*args, **kwargs):
        seen.append(gc.isenabled())
        if raises:
            raise RuntimeError("boom")
        return real(*args, **kwargs)

    from migrator.fix import python_fixer

    real = python_fixer.fix_python
    monkeypatch.setattr(python_fixer, "fix_python", recording)
    assert gc.isenabled()
    [outcome] = pool.fix_modules([pool.PythonJob("import torch\nx = torch.zeros(1).cuda()\n", (), "npu", False)], workers=1)
    assert seen == [False] and gc.isenabled()
    assert (outcome.error is not None) == raises
