"""Rules of the house that no linter checks (issue 27): no private name taken across packages, no
`dict[str, Any]` in a signature another package uses, no target/verdict compared as a bare string.

Each rule runs over migrator/ and over a small synthetic package it must flag (so it can fail). The ALLOWED
sets name the offenders still left, each with its reason; a stale entry fails the run.
"""

from __future__ import annotations

import pytest

from tests.house_rules import (
    Module,
    any_mapping_signatures,
    literal_comparisons,
    private_imports,
    repository_modules,
)

# (importer, "module:name")
ALLOWED_PRIVATE_IMPORTS: set[tuple[str, str]] = set()

# "path:qualified name"; the JSON boundary readers are allowed by name (they take what json.load gave)
JSON_BOUNDARY_READERS = {
    "migrator/ground/jsonfile.py:loads_bounded",
    "migrator/ground/jsonfile.py:read_json",
    "migrator/ground/jsonfile.py:read_json_or_none",
    "migrator/ground/schema_check.py:load_schema",
}
ALLOWED_ANY_MAPPINGS = JSON_BOUNDARY_READERS

ALLOWED_LITERAL_COMPARISONS: set[tuple[str, str]] = set()


@pytest.fixture(scope="module")
def modules() -> list[Module]:
    return repository_modules()


@pytest.fixture(scope="module")
def found(modules):
    """found(rule): the rule's offenders in migrator/, computed once per test process (the stale-entry test
    asks every rule again)."""
    results: dict = {}

    def get(rule):
        if rule not in results:
            results[rule] = rule(modules)
        return results[rule]

    return get


def _new(found: set, allowed: set) -> list:
    return sorted(found - allowed)


def test_no_private_name_is_imported_across_packages(found):
    offenders = _new(found(private_imports), ALLOWED_PRIVATE_IMPORTS)
    assert not offenders, "\n".join(f"{path} takes {name}" for path, name in offenders)


def test_no_dict_str_any_in_a_signature_another_package_uses(found):
    offenders = _new(found(any_mapping_signatures), ALLOWED_ANY_MAPPINGS)
    assert not offenders, "\n".join(offenders)


def test_no_target_or_verdict_compared_with_a_string_literal(found):
    offenders = _new(found(literal_comparisons), ALLOWED_LITERAL_COMPARISONS)
    assert not offenders, "\n".join(f"{path}: {text}" for path, text in offenders)


def test_no_allowed_entry_is_stale(found):
    """An exception that no longer matches anything is removed, so the sets only shrink."""
    stale = sorted(ALLOWED_PRIVATE_IMPORTS - found(private_imports))
    stale += sorted((ALLOWED_ANY_MAPPINGS - JSON_BOUNDARY_READERS) - found(any_mapping_signatures))
    stale += sorted(ALLOWED_LITERAL_COMPARISONS - found(literal_comparisons))
    assert not stale, stale


# ------------------------------------------------------------------ each checker flags a synthetic offender
def _package(files: dict[str, str]) -> list[Module]:
    out = []
    for path, source in files.items():
        parts = path[: -len(".py")].split("/")
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        out.append(Module(name, path, source))
    return out


def test_private_import_checker_flags_another_packages_private_name():
    modules = _package({
        "migrator/a/__init__.py": "",
        "migrator/a/low.py": "def _helper(): ...\ndef public(): ...\n",
        "migrator/a/same.py": "from migrator.a.low import _helper\nfrom .low import _helper as h\n",
        "migrator/b/__init__.py": "",
        "migrator/b/user.py": ("from migrator.a.low import _helper, public\n"
                               "def f():\n    from ..a import low\n    return low._helper()\n"),
    })
    assert private_imports(modules) == {("migrator/b/user.py", "migrator.a.low:_helper")}


def test_private_import_checker_flags_a_relative_import_out_of_the_package():
    modules = _package({
        "migrator/a/__init__.py": "",
        "migrator/a/low.py": "_LIMIT = 3\n",
        "migrator/a/inner/__init__.py": "",
        "migrator/a/inner/user.py": "from ..low import _LIMIT\n",
    })
    assert private_imports(modules) == {("migrator/a/inner/user.py", "migrator.a.low:_LIMIT")}


def test_any_mapping_checker_flags_only_signatures_used_across_packages():
    modules = _package({
        "migrator/a/__init__.py": "from .low import reexported\n",
        "migrator/a/low.py": (
            "from typing import Any, Mapping\n"
            "def loose(d: dict[str, Any]) -> int: ...\n"
            "def reexported(x: int) -> 'list[Mapping[str, Any]]': ...\n"
            "def typed(d: dict[str, int]) -> dict[str, object]: ...\n"
            "def private_use(d: dict[str, Any]) -> None: ...\n"
            "class Record:\n    def to_dict(self) -> dict[str, Any]: ...\n"),
        "migrator/a/same.py": "from .low import private_use\n",
        "migrator/b/__init__.py": "",
        "migrator/b/user.py": ("from migrator.a import reexported\nfrom migrator.a.low import Record, typed\n"
                               "import migrator.a.low as low\nlow.loose({})\n"),
    })
    assert any_mapping_signatures(modules) == {
        "migrator/a/low.py:loose", "migrator/a/low.py:reexported", "migrator/a/low.py:Record.to_dict"}


def test_literal_checker_flags_targets_and_verdicts_but_not_other_strings():
    modules = _package({
        "migrator/x.py": (
            "if target == 'npu': pass\n"
            "if 'portable' != options.target: pass\n"
            "if fix_target in ('npu', 'portable'): pass\n"
            "if stage.status in ('pass', 'warn'): pass\n"
            "if device == 'npu': pass\n"                # a device string, not a target
            "if route.status == 'covered': pass\n"      # not a verdict value
            "if name == 'target': pass\n"),
        "migrator/ground/kinds.py": "if target == 'npu': pass\n",
    })
    assert {text for _, text in literal_comparisons(modules)} == {
        "target == 'npu'", "'portable' != options.target", "fix_target in ('npu', 'portable')",
        "stage.status in ('pass', 'warn')"}
