"""The validation package gets its migrate step from the api (it never imports the api)."""

from __future__ import annotations

import pytest

from migrator.ground.usage_error import UsageError
from migrator.validation.parent import stages
from migrator.validation.parent.options import Options
from migrator.validation.parent.results import StageResult


def _fake_s1(monkeypatch, seen, tree):
    (tree / "validate.py").write_text("# the protocol's place (S1 is faked)\n")

    def fake(ctx):
        seen.append(ctx.migrated)
        return StageResult("S1", "pass", summary="fake")

    monkeypatch.setitem(stages.PROTOCOL.stages, "S1", fake)


def test_the_given_migrate_step_makes_the_migrated_tree(monkeypatch, tmp_path):
    seen: list[str] = []
    _fake_s1(monkeypatch, seen, tmp_path)
    calls = []

    def migrate(original: str, out: str) -> list[str]:
        calls.append((original, out))
        (tmp_path / "work" / "migrated").mkdir()
        return []

    opts = Options(original=str(tmp_path), stages=("S1",), work_dir=str(tmp_path / "work"))
    stages.run(opts, migrate=migrate)
    assert calls == [(str(tmp_path), str(tmp_path / "work" / "migrated"))]
    assert seen == [str(tmp_path / "work" / "migrated")]


def test_migrate_errors_and_a_missing_step_are_setup_errors(monkeypatch, tmp_path):
    _fake_s1(monkeypatch, [], tmp_path)
    opts = Options(original=str(tmp_path), stages=("S1",), work_dir=str(tmp_path / "work"))
    with pytest.raises(stages.ValidationSetupError, match="migrate fix failed: a.py: boom"):
        stages.run(opts, migrate=lambda original, out: ["a.py: boom"])
    with pytest.raises(stages.ValidationSetupError, match="no migrate step"):
        stages.run(opts)


def test_api_passes_migrate_fix(monkeypatch, tmp_path):
    from migrator import api

    tree = tmp_path / "tree"
    tree.mkdir()
    (tree / "train.py").write_text("import torch\ntorch.cuda.synchronize()\n")
    _fake_s1(monkeypatch, [], tree)
    api.validate(tree, stages=("S1",), work_dir=str(tmp_path / "work"))
    assert "torch.npu.synchronize" in (tmp_path / "work" / "migrated" / "train.py").read_text()
    with pytest.raises(UsageError, match="--work-dir .*inside the tree being validated"):
        api.validate(tree, stages=("S1",), work_dir=str(tree / "work"))
