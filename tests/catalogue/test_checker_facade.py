"""Detectors talk to the scanner only through the `Checker` facade (emit, claim, qualnames; built_by and
module_calls: what a receiver was assigned, for the fused-optimizer zero_grad rule)."""

from __future__ import annotations

import ast
from pathlib import Path

from migrator.catalogue.loader import load_catalogue
from migrator.catalogue.protocols import Checker
from migrator.engine.python_checker import CheckerFacade, PythonChecker

RULES = Path(__file__).resolve().parents[2] / "migrator" / "rules"
FACADE = {"emit", "claim", "qualnames", "built_by", "module_calls"}


def test_the_facade_offers_the_protocols_methods_and_no_field():
    assert {n for n in vars(Checker) if not n.startswith("_")} == FACADE
    assert {n for n in vars(CheckerFacade) if not n.startswith("_")} == FACADE
    tree = ast.parse("x = 1\n")
    facade = PythonChecker(load_catalogue(), lambda rule: True, tree).facade
    assert not hasattr(facade, "claimed") and not hasattr(facade, "__dict__")


def test_no_detector_reaches_past_the_facade():
    """Every `checker.<attr>` in a unit is one of the facade's methods (before: `checker.claimed.add`)."""
    used = set()
    for path in RULES.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "checker":
                used.add((path.name, node.attr))
    assert used and {attr for _, attr in used} <= FACADE, sorted(used)


def test_a_detector_claims_and_emits_through_the_facade():
    """`x.type == "cuda"`: the device-type-compare detector claims the "cuda" literal (so no device-string
    finding) and emits its own finding."""
    tree = ast.parse('if x.type == "cuda":\n    pass\n')
    checker = PythonChecker(load_catalogue(), lambda rule: True, tree)
    checker.visit(tree)
    assert [(rule.code, symbol) for rule, _, symbol, _, _ in checker.hits] == [("DEV013", '== "cuda"')]
