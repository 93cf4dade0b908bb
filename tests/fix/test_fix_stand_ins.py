"""Statements without work stand in for themselves in the text libcst parses (`fix/stand_ins.py`): the fix
of a module is the same as with the whole module parsed, and the stand-ins render as their source text."""

from __future__ import annotations

import ast

import libcst as cst
import pytest

from migrator import api
from migrator.catalogue.loader import load_catalogue
from migrator.fix import python_fixer
from migrator.fix.stand_ins import NAME, stand_ins

# the first indented block (two spaces) holds no work: libcst must still find its indentation unit there
SHAPES = '''"""A module docstring."""
from __future__ import annotations

import os
import torch


def helper(a,
           b):  # no site
  return a + b

try:
    import apex
except ImportError:
    apex = None


@torch.no_grad()
def untouched(x):
    y = x * 2; z = y + 1
    return z
    # an indented comment after the block: its footer


class Model(torch.nn.Module):
    """A class with one site."""

    def __init__(self):
        super().__init__()
        self.layer = torch.nn.Linear(2, 2)
        # a comment at the method's level

    def other(self):
        for i in range(3):
            pass
        else:
            return 1

    def forward(self, x):
        if x is None:
            return None
        elif x.dim() == 1:
            return x.cuda()
        else:
            total = 0
            for i in range(3):
                total += i
            return total

    def after(self):
        try:
            return 1
        except ValueError:
            return 2
        finally:
            pass


def device():
    return torch.cuda.current_device()
# a comment at the top level


def tail(x):
    return x'''


def _findings(tmp_path, source: str) -> list:
    (tmp_path / "pyproject.toml").write_text("[project]\nname='x'\n")
    (tmp_path / "train.py").write_text(source, newline="")
    return [f for f in api.scan([tmp_path], use_cache=False).findings if f.path == "train.py"]


def _fix(source: str, findings: list, target: str):
    return python_fixer.fix_python(source, findings, load_catalogue().rules, target, False)


@pytest.mark.parametrize("target", ["npu", "portable"])
@pytest.mark.parametrize("newline", ["\n", "\r\n"])
def test_a_fix_with_stand_ins_equals_the_whole_module_parse(tmp_path, monkeypatch, target, newline):
    source = SHAPES.replace("\n", newline)
    findings = _findings(tmp_path, source)
    assert findings
    parsed: list[str] = []
    real_parse = cst.parse_module
    monkeypatch.setattr(cst, "parse_module", lambda text, *a: parsed.append(text) or real_parse(text, *a))
    stood = _fix(source, findings, target)
    assert any(NAME in text for text in parsed)  # stand-ins were parsed, not the whole module
    monkeypatch.setattr(python_fixer, "stand_ins", lambda *args: None)
    whole = _fix(source, findings, target)
    assert stood.applied and stood.text != source
    assert (stood.text, stood.applied, stood.declined, stood.runtime_names) == (
        whole.text, whole.applied, whole.declined, whole.runtime_names)


@pytest.mark.parametrize("newline", ["\n", "\r\n"])
def test_stand_ins_keep_the_lines_the_indentation_and_the_text(newline):
    source = SHAPES.replace("\n", newline)
    tree = ast.parse(source)
    work = [n.lineno for n in ast.walk(tree) if isinstance(n, ast.Attribute) and n.attr == "cuda"]
    stand = stand_ins(source, tree, work)
    assert stand is not None and stand.sources
    assert stand.text.count("\n") == source.count("\n") and len(stand.text) < len(source)
    whole, partial = cst.parse_module(source), cst.parse_module(stand.text)
    assert (partial.default_indent, partial.default_newline, partial.has_trailing_newline) == (
        whole.default_indent, whole.default_newline, whole.has_trailing_newline)
    assert partial.default_indent == "  "
    installed = stand.install(partial)
    assert installed.code == source  # every stand-in renders as its own text
    assert len(installed.body) == len(whole.body)
    assert installed.body[0].deep_equals(whole.body[0])  # the docstring is parsed, not stood in for


def test_a_module_already_holding_the_stand_in_name_is_parsed_whole():
    source = f"{NAME} = 1\n\n\ndef f(x):\n    return x.cuda()\n"
    tree = ast.parse(source)
    assert stand_ins(source, tree, [5]) is None
