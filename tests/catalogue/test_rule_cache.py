"""The built catalogue kept between runs (`catalogue/rule_cache.py`) never gives rules the YAML would not."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from migrator.catalogue import loader, rule_cache
from migrator.ground.resources import data_dir

load = loader.load_catalogue.__wrapped__  # past the in-process memo: each call is a new run's load


@pytest.fixture
def rules(tmp_path: Path) -> Path:
    folder = tmp_path / "rules"
    shutil.copytree(data_dir("rules"), folder)
    return folder


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("MIGRATE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("MIGRATE_START_CACHE", raising=False)
    return tmp_path / "cache" / "catalogue"


def _no_yaml(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: object) -> None:
        raise AssertionError("the rules were built from the YAML")

    monkeypatch.setattr(loader, "_build", refuse)


def _same(a: loader.Catalogue, b: loader.Catalogue) -> None:
    assert a.digest == b.digest
    assert a.rules == b.rules
    assert a.roots == b.roots and a.by_impl == b.by_impl


def test_a_second_run_reads_the_kept_rules(rules: Path, cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    built = load(rules)
    assert len(list(cache.glob("*.pickle"))) == 1
    _no_yaml(monkeypatch)
    _same(load(rules), built)


def test_a_changed_rule_file_is_read_from_its_yaml(rules: Path, cache: Path) -> None:
    load(rules)
    device = rules / "device.yaml"
    text = device.read_text(encoding="utf-8")
    code = next(line.split(":", 1)[1].strip() for line in text.splitlines() if line.strip().startswith("- code:"))
    device.write_text(text.replace("\n    message:", "\n    message: Changed.", 1), encoding="utf-8")
    changed = load(rules)
    assert changed.get(code).message.startswith("Changed.")
    assert len(list(cache.glob("*.pickle"))) == 2  # the new key's own file; the other is never read for it


def test_a_broken_rule_file_is_still_an_error(rules: Path, cache: Path) -> None:
    load(rules)
    (rules / "device.yaml").write_text("family: device\nrules: [{code: X}]\n", encoding="utf-8")
    with pytest.raises(loader.CatalogueError, match="device.yaml"):
        load(rules)


@pytest.mark.parametrize("content", [b"", b"not a pickle", b"\x80\x05K\x01."])  # empty, garbage, a pickled 1
def test_a_corrupt_cache_falls_back_to_the_yaml(rules: Path, cache: Path, content: bytes) -> None:
    built = load(rules)
    (kept,) = cache.glob("*.pickle")
    kept.write_bytes(content)
    _same(load(rules), built)
    assert kept.read_bytes() != content  # written again


def test_a_catalogue_of_other_rules_under_the_key_is_ignored(rules: Path, cache: Path) -> None:
    built = load(rules)
    (kept,) = cache.glob("*.pickle")
    other = loader.Catalogue({}, "000000000000")
    rule_cache.write(kept.stem, other)
    _same(load(rules), built)


def test_an_unwritable_cache_folder_still_loads(rules: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    monkeypatch.setenv("MIGRATE_CACHE_DIR", str(blocker / "below"))  # no folder can be made under a file
    assert load(rules).rules == load(rules).rules


def test_turned_off_nothing_is_written(rules: Path, cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MIGRATE_START_CACHE", "0")
    load(rules)
    assert not cache.exists()


def test_the_key_follows_the_unit_modules(monkeypatch: pytest.MonkeyPatch) -> None:
    texts = [(path, path.read_bytes()) for path in loader.catalogue_files()]
    before = rule_cache.key(texts)
    modules = rule_cache._unit_modules()
    assert "device/cuda_device_string.py" in modules
    monkeypatch.setattr(rule_cache, "_unit_modules", lambda: [m for m in modules if m != "device/cuda_device_string.py"])
    assert rule_cache.key(texts) not in (None, before)
