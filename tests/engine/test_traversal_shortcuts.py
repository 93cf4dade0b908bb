"""The checker's traversal finds once what does not change per node (session 15): type expressions' strings are
claimed while they are visited instead of by a walk of their own, a dotted name's qualified names are resolved once
per module, the set-up walks the statements once, and the string detectors test a substring before their pattern.
Each is held here to what it replaced, on `samples/`, `tests/fixtures/` and edge cases."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from migrator.catalogue.loader import load_catalogue
from migrator.catalogue.patterns import DEVICE_STRING, NCCL_STRING
from migrator.engine.extension_builds import CUDA_SOURCE_NAME
from migrator.engine.import_calls import attribute_modules, collect_aliases
from migrator.engine.python_checker import PythonChecker
from migrator.engine.statements import sorted_statements, statement_list
from migrator.rules.device.cuda_tensor_type_string import CUDA_TENSOR_TYPE
from tests.engine.helpers import parsed_modules

ROOT = Path(__file__).resolve().parents[2]
TYPES = '''
from typing import Literal, Optional
import typing_extensions as te
import torch
def f(x: Literal["cuda", "cpu"] = "cuda", y: "cuda" = None, *a: Optional["Tensor"], z: te.Literal[b"cuda"] = 0,
      w: dict[str, f"{'cuda'}"] = None) -> Literal["cuda"]:
    v: Literal["cuda"] = "cuda"
    u: torch.Tensor = torch.zeros(1, device="cuda")
    t: "bf16" = "bf16"
    return lambda q: Literal["cuda"]
def g(s: torch.Tensor, r: "torch.Tensor"):
    pass
class K:
    mode: Literal["nccl"] = "nccl"
'''


class _WalkedTypes(PythonChecker):
    """The checker before: each type expression's strings claimed by a walk of their own, then visited."""

    def visit_arg(self, node: ast.arg) -> None:
        if node.annotation is not None and self.qualnames(node.annotation) & {"torch.Tensor"}:
            self.tensor_names.add(node.arg)
        self.claim_strings(node.annotation)
        self.generic_visit(node)

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        if node.value is not None:
            self.assigned_values.add(node.value)
        self.claim_strings(node.annotation)
        self.generic_visit(node)

    def visit_Subscript(self, node: ast.Subscript) -> None:
        if self.qualnames(node.value) & {"typing.Literal", "typing_extensions.Literal"}:
            self.claim_strings(node.slice)
        self.generic_visit(node)


def _sources() -> list[str]:
    return [TYPES] + [p.read_text(encoding="utf-8") for folder in ("samples", "tests/fixtures")
                      for p in sorted((ROOT / folder).rglob("*.py"))]


@pytest.fixture(scope="module")
def trees() -> list[ast.Module]:
    return parsed_modules(_sources())


def _outcome(checker_class: type[PythonChecker], tree: ast.Module) -> tuple:
    checker = checker_class(load_catalogue(), lambda rule: True, tree)
    checker.visit(tree)
    hits = [(rule.code, node.lineno, node.col_offset, symbol, replacement) for rule, node, symbol, replacement, _ in
            checker.hits]
    return hits, sorted(checker.dtypes_used), sorted(checker.tensor_names), [(n, c.lineno) for n, c in checker.calls]


def test_type_expression_strings_are_claimed_as_by_a_walk(trees):
    for tree in trees:
        assert _outcome(PythonChecker, tree) == _outcome(_WalkedTypes, tree)
    hits, dtypes, tensors, _calls = _outcome(PythonChecker, trees[0])
    # the values, not the types (`b"cuda"` is no name: bytes are never claimed as one)
    assert sorted((line, symbol) for _code, line, _col, symbol, _r in hits) == [
        (5, "cuda"), (5, "cuda"), (7, "cuda"), (8, "cuda"), (14, "nccl")]
    assert tensors == ["s"] and dtypes == ["bf16"]  # `t: "bf16"` names a type: only its value counts


def test_qualified_names_are_found_once_and_given_fresh(trees):
    for tree in trees:
        checker = PythonChecker(load_catalogue(), lambda rule: True, tree)
        for node in ast.walk(tree):
            if isinstance(node, (ast.Attribute, ast.Name)):
                first = checker.qualnames(node)
                assert first == checker._qualnames(node)
                first.add("changed by a caller")
                assert "changed by a caller" not in checker.qualnames(node)


def test_one_statement_walk_keeps_what_the_binding_passes_read(trees):
    for tree in trees:
        every = statement_list(tree)
        bindings, tries, scopes, guards, _ = sorted_statements(tree)
        kinds = {id(s) for s in bindings}
        assert [s for s in every if id(s) in kinds] == bindings  # `statement_list`'s order
        assert collect_aliases(tree, bindings) == collect_aliases(tree, every)
        aliases = collect_aliases(tree, every)
        assert attribute_modules(bindings, aliases, lambda m: True) == attribute_modules(every, aliases, lambda m: True)
        assert tries == [s for s in every if type(s).__name__ in ("Try", "TryStar")]
        assert scopes == [s for s in every if isinstance(s, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))]
        assert len(guards) == sum(isinstance(s, (ast.Assign, ast.AnnAssign, ast.If, ast.While, ast.Assert))
                                  for s in every)


EDGE_STRINGS = ["cuda", "cuda:0", "cuda:{}", "CUDA", "nccl", "NCCL", "NcCl", "gloo:nccl,cpu:gloo", "cpu:gloo,cuda:NCCL",
                "torch.cuda.FloatTensor", "torch.cuda.HalfStorage", "kernel.cu", "*.cuh", ".cu", "x.cu.bak", "a b.cu",
                "ﬃnccl", "İnccl", "nccl\n", "cuda\n", "", "x"]


def test_each_string_pattern_needs_its_substring(trees):
    strings = set(EDGE_STRINGS)
    for tree in trees:
        strings.update(n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str))
    needs = [(DEVICE_STRING.match, lambda t: "cuda" in t), (CUDA_TENSOR_TYPE.match, lambda t: "torch.cuda." in t),
             (NCCL_STRING.match, lambda t: "nccl" in t.lower()), (CUDA_SOURCE_NAME.fullmatch, lambda t: ".cu" in t)]
    matched = 0
    for text in strings:
        for pattern, substring in needs:
            if pattern(text):
                matched += 1
                assert substring(text), text
    assert matched >= 12  # the edge cases and the fixtures do reach the patterns
    # what the nccl test relies on: the pattern's (?i) letters n, c, l match no character but N, C, L (whose
    # lower case is one character; no cased letter lies above U+20000), so a matching text lowered holds "nccl"
    letter = re.compile("(?i)[ncl]")
    assert {chr(c) for c in range(0x20000) if letter.fullmatch(chr(c))} == set("nclNCL")
