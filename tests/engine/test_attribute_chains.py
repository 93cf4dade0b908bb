"""A chain whose root name no import binds (`self.a.b`) is handled in one loop instead of one visit per link:
every link must still reach the attribute detectors, and chains rooted at an import must still resolve."""

from __future__ import annotations

import ast

from migrator.catalogue.loader import load_catalogue
from migrator.engine.python_checker import PythonChecker
from tests.engine.helpers import scan_text

CODE = """import torch
import torch.nn.functional as F

def f(model, batch, self):
    a = model.encoder.weight.is_cuda.real      # the detector's link is an inner one
    b = batch.is_cuda                          # the outermost link
    c = self.is_cuda                           # the module's own flag: no finding
    d = model.is_cuda.x.is_cuda                # two links of one chain
    e = get(model).is_cuda                     # the chain's root is a call: visited as before
    torch.cuda.synchronize()                   # rooted at an import
    g = F.softmax(model.out.is_cuda, 0)
"""


class _OneVisitPerLink(PythonChecker):
    """The traversal before the shortcut: each link visited, its root name too."""

    def visit_Attribute(self, node: ast.Attribute) -> None:
        root = node.value
        while type(root) is ast.Attribute:
            root = root.value
        if (type(root) is ast.Name and (root.id in self.aliases or root.id in self.alias_roots)
                and self.report_symbol(node)):
            return
        for detect in self.detect_attribute:
            detect(self.facade, node)
        self.generic_visit(node)


def _seen(code: str, checker_class: type[PythonChecker]) -> tuple[list[tuple[int, str]], list[tuple[str, int]]]:
    """(line, name) of every `Attribute` the attribute detectors were shown, in order, and the hits."""
    seen: list[tuple[int, str]] = []

    def record(_facade, node):
        seen.append((node.lineno, node.attr))

    tree = ast.parse(code)
    checker = checker_class(load_catalogue(), lambda rule: True, tree)
    checker.detect_attribute = (*checker.detect_attribute, record)
    checker.attribute_names = None  # every link shown to the detectors (not only the names their units declare)
    checker.visit(tree)
    return seen, [(symbol, node.lineno) for _rule, node, symbol, _r, _e in checker.hits]


def test_every_link_of_an_unresolved_chain_reaches_the_detectors():
    seen, hits = _seen(CODE, PythonChecker)
    assert (seen, hits) == _seen(CODE, _OneVisitPerLink)
    assert [name for line, name in seen if line == 5] == ["real", "is_cuda", "weight", "encoder"]  # outermost first


def test_links_report_as_before(tmp_path):
    result = scan_text(tmp_path, CODE)
    lines = sorted(f.line for f in result.findings if f.name == "tensor-is-cuda")
    assert lines == [5, 6, 8, 8, 9, 11]
    assert any(f.line == 10 and f.symbol == "torch.cuda.synchronize" for f in result.findings)
