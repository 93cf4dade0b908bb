"""A module whose every site the scan declined is not parsed by libcst, and its declines are the fixer's:
the same sites, reasons and order as the fixer's walk gives them (compared with the fixer itself)."""

from __future__ import annotations

import ast
from dataclasses import replace

import libcst as cst

from migrator import api
from migrator.catalogue.loader import load_catalogue
from migrator.fix import python_fixer
from migrator.fix.scanned_declines import declined_as_scanned

DECLINED = '''import torch


def pick(device):
    if device.type in ("cuda", "xpu"):
        return 1
    return 2


def other(device):
    return device.type in {"cuda", "mps"}
'''
ONE_STATEMENT = 'def both(a, b):\n    return a.type in ("cuda", "x") or b.type in {"cuda", "y"}\n'


def _findings(tmp_path, source):
    (tmp_path / "pyproject.toml").write_text("[project]\nname='x'\n")
    (tmp_path / "train.py").write_text(source)
    return [f for f in api.scan([tmp_path], use_cache=False).findings if f.path == "train.py"]


def _fix(source, findings):
    return python_fixer.fix_python(source, findings, load_catalogue().rules, "npu", False)


def test_every_site_declined_by_the_scan_is_declined_again_without_libcst(tmp_path, monkeypatch):
    findings = _findings(tmp_path, DECLINED)
    assert len(findings) == 2 and all(f.declined and f.fix is None for f in findings)
    monkeypatch.setattr(python_fixer, "declined_as_scanned", lambda *args: None)  # the fixer's own walk
    walked = _fix(DECLINED, findings)
    monkeypatch.undo()

    def no_parse(*args, **kwargs):
        raise AssertionError("libcst parsed a module with nothing to fix")

    monkeypatch.setattr(cst, "parse_module", no_parse)
    fast = _fix(DECLINED, findings)
    assert fast.text == walked.text == DECLINED and fast.applied == walked.applied == []
    assert fast.declined == walked.declined and [f for f, _ in fast.declined] == findings


def test_an_order_it_cannot_tell_goes_to_the_fixer(tmp_path):
    findings = _findings(tmp_path, ONE_STATEMENT)  # two sites in one statement: the walk's order is not the source's
    assert len(findings) == 2 and declined_as_scanned(ast.parse(ONE_STATEMENT), findings, load_catalogue().rules) is None


def test_a_site_it_may_fix_or_on_an_import_line_goes_to_the_fixer(tmp_path):
    findings = _findings(tmp_path, DECLINED)
    rules, tree = load_catalogue().rules, ast.parse(DECLINED)
    assert declined_as_scanned(tree, findings, rules) is not None
    on_import_line = replace(findings[0], line=1, end_line=1)  # judged after the walk, by what the import binds
    assert declined_as_scanned(tree, [on_import_line, findings[1]], rules) is None
    assert declined_as_scanned(tree, [replace(findings[0], declined=None), findings[1]], rules) is None
