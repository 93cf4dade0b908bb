"""The catalogue's registries: one name per rule (its unit module is derived from its family and name),
one map of pattern-rule (`impl:`) names, and load-time errors that name the YAML file and the rule."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from migrator.catalogue import units
from migrator.catalogue.impls import KNOWN_IMPLS
from migrator.catalogue.loader import CatalogueError, load_catalogue, rule_location
from migrator.catalogue.protocols import DETECTOR_KINDS

PACKAGE = Path(units.__file__).parents[1]
RULES_YAML = PACKAGE.parent / "rules"
CATALOGUE = load_catalogue()


def _load_edited(tmp_path: Path, family: str, old: str, new: str):
    src = (RULES_YAML / f"{family}.yaml").read_text(encoding="utf-8")
    assert old in src
    (tmp_path / f"{family}.yaml").write_text(src.replace(old, new, 1), encoding="utf-8")
    return load_catalogue.__wrapped__(tmp_path)


def test_a_unit_module_path_is_derived_from_family_and_name():
    rule = CATALOGUE.rules["DEV012"]
    assert (rule.family, rule.name, rule.fix) == ("device", "cuda-device-string", "unit")
    assert rule.unit_module == "migrator.rules.device.cuda_device_string"
    assert units.module_path(rule.unit_module) == "migrator/rules/device/cuda_device_string.py"
    assert CATALOGUE.rules["DEV001"].unit_module == "migrator.rules.rename"  # fix: rename
    assert CATALOGUE.rules["DEV002"].unit_module is None  # fix: none


def test_every_unit_module_of_the_catalogue_is_the_file_its_name_says():
    for rule in CATALOGUE.rules.values():
        if rule.fix == "unit":
            path = PACKAGE.parent / units.module_path(units.unit_module(rule.family, rule.name))
            assert path.is_file(), rule.code
            assert units.unit(rule).__file__ == str(path), rule.code


def test_every_public_unit_module_belongs_to_a_rule():
    """A module under migrator/rules/<family>/ is a rule's unit (by its name) or a private helper (`_x.py`)."""
    owned = {rule.unit_module for rule in CATALOGUE.rules.values() if rule.fix == "unit"}
    for path in sorted((PACKAGE / "rules").glob("*/*.py")):
        if path.name.startswith("_"):
            continue
        dotted = ".".join(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        assert dotted in owned, f"{path}: no rule named {path.stem.replace('_', '-')} in rules/{path.parent.name}.yaml"


def test_every_unit_implements_the_rule_unit_protocol():
    for rule in CATALOGUE.rules.values():
        unit = units.unit(rule)
        if unit is None:
            continue
        assert unit.LEVEL in ("node", "call", "either", "argument", "module"), rule.code
        assert callable(unit.precheck), rule.code
        fixer = "fix_module" if unit.LEVEL == "module" else "fix"  # a module-level unit rewrites the whole module
        assert callable(getattr(unit, fixer, None)) or callable(getattr(unit, "precheck_text", None)), rule.code


def test_a_unit_module_that_does_not_exist_is_a_catalogue_error_naming_file_rule_and_path(tmp_path):
    with pytest.raises(CatalogueError) as error:
        _load_edited(tmp_path, "device", "name: tensor-cuda-call\n", "name: tensor-cuda-calls\n")
    message = str(error.value)
    assert message.startswith("device.yaml: rule DEV010:")
    assert "migrator/rules/device/tensor_cuda_calls.py, which does not exist" in message


def test_a_fix_value_that_is_not_none_rename_or_unit_is_a_catalogue_error(tmp_path):
    with pytest.raises(CatalogueError, match=r"device\.yaml: rule DEV010: `fix` must be one of none, rename, unit"):
        _load_edited(tmp_path, "device", 'Use `.npu()`"\n    fix: unit\n', 'Use `.npu()`"\n    fix: "transform:x"\n')


def test_an_unknown_impl_name_is_a_catalogue_error(tmp_path):
    with pytest.raises(CatalogueError, match=r"device\.yaml: rule DEV012: `impl: device-strin` names no detection"):
        _load_edited(tmp_path, "device", "impl: device-string\n", "impl: device-strin\n")


def test_the_impl_map_is_the_catalogues_and_a_name_no_rule_can_carry_is_an_error():
    assert CATALOGUE.impl_rule("device-string") is CATALOGUE.rules["DEV012"]
    assert set(CATALOGUE.by_impl) == {r.impl for r in CATALOGUE.rules.values() if r.impl}
    with pytest.raises(CatalogueError, match="no pattern rule is named 'device-strin'"):
        CATALOGUE.impl_rule("device-strin")


def test_every_known_impl_is_in_the_catalogue_and_reported_by_the_code():
    """The registry cannot rot: each name is a rule's, and some checker or detector reports it."""
    assert KNOWN_IMPLS == set(CATALOGUE.by_impl)
    sources = "\n".join(p.read_text(encoding="utf-8") for p in (PACKAGE / "engine").glob("*.py"))
    sources += "\n".join(p.read_text(encoding="utf-8") for p in (PACKAGE / "rules").rglob("*.py"))
    unreported = sorted(name for name in KNOWN_IMPLS if not re.search(rf"[\"'](impl:)?{re.escape(name)}[\"']", sources))
    assert unreported == []


def test_detectors_are_found_once_each_through_the_registry():
    for kind in DETECTOR_KINDS:
        found = units.detectors(CATALOGUE, kind)
        assert len(found) == len(set(found))
    # AMP004 and AMP005 share one detector (`amp/_autocast.py`): it runs once per call, not twice
    call = units.detectors(CATALOGUE, "call")
    shared = units.detector_of(CATALOGUE.rules["AMP004"], "call")
    assert shared is units.detector_of(CATALOGUE.rules["AMP005"], "call") and call.count(shared) == 1
    with pytest.raises(ValueError, match="no detector kind"):
        units.detectors(CATALOGUE, "subscript")  # type: ignore[call-overload]


def test_a_rule_location_is_its_yaml_entry():
    path, line = rule_location(CATALOGUE.rules["DEV012"])
    assert path.name == "device.yaml"
    assert re.match(r"\s*- code: DEV012\b", path.read_text(encoding="utf-8").splitlines()[line - 1])
