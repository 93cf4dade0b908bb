"""The scan after `fix` writes reads again only the files fix changed, and finds what a fresh scan finds."""

from __future__ import annotations

from pathlib import Path

import pytest

from migrator import api
from migrator.engine import runner


def test_rescan_after_fix_scans_only_changed_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "train.py").write_text("import torch\nx = torch.zeros(3).cuda()\n")
    (tmp_path / "manual.py").write_text("import torch\nimport apex.amp\nfrom apex import amp\nmodel, opt = amp.initialize(m, o, opt_level='O2', num_losses=3)\n")
    (tmp_path / "plain.py").write_text("import os\nprint(os.getcwd())\n")
    scanned: list[str] = []
    real = runner._scan_one

    def counting(args):
        scanned.append(args[1])
        return real(args)

    monkeypatch.setattr(runner, "_scan_one", counting)
    outcome = api.fix([tmp_path], use_cache=False, jobs=1)
    changed = {c.path for c in outcome.plan.changes if c.after != c.before}
    assert changed == {"train.py"}
    assert sorted(scanned[:3]) == ["manual.py", "plain.py", "train.py"]  # the first scan: everything
    assert scanned[3:] == ["train.py"]  # the rescan: only what fix wrote
    fresh = api.scan([tmp_path], use_cache=False)
    assert [(f.path, f.code, f.line) for f in outcome.remaining.findings] == [(f.path, f.code, f.line) for f in fresh.findings]
