"""The fixer walks only statements that hold a finding or an import, and still fixes every site
inside them: decorators (outside a function's own range), default values, nested classes."""

from __future__ import annotations

import libcst as cst

from migrator import api
from migrator.fix import python_fixer

SOURCE = '''import torch


def plain(a, b):
    return a + b


@torch.cuda.amp.custom_fwd
def forward(x, device="cuda"):
    return x


class Model:
    class Inner:
        def go(self, x):
            import apex
            return x.cuda()

    def other(self):
        return 1
'''


def _fix(tmp_path, source):
    (tmp_path / "pyproject.toml").write_text("[project]\nname='x'\n")
    (tmp_path / "train.py").write_text(source)
    outcome = api.fix([tmp_path], write=False, use_cache=False)
    (change,) = [c for c in outcome.plan.changes if c.path == "train.py"]
    return change


def test_sites_in_decorators_defaults_and_nested_statements_are_fixed(tmp_path):
    change = _fix(tmp_path, SOURCE)
    assert change.error is None
    assert '"cuda"' not in change.after and ".cuda()" not in change.after
    assert "torch.cuda.amp.custom_fwd" not in change.after
    assert "def plain(a, b):\n    return a + b\n" in change.after


def test_statements_without_a_site_are_not_walked(tmp_path, monkeypatch):
    visited: list[str] = []
    real = python_fixer._Fixer.visit_FunctionDef if hasattr(python_fixer._Fixer, "visit_FunctionDef") else None

    def visit_FunctionDef(self, node: cst.FunctionDef):
        visited.append(node.name.value)
        return real(self, node) if real else True

    monkeypatch.setattr(python_fixer._Fixer, "visit_FunctionDef", visit_FunctionDef, raising=False)
    _fix(tmp_path, SOURCE)
    assert "forward" in visited and "go" in visited
    assert "plain" not in visited and "other" not in visited
