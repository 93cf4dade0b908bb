"""A Python file with nothing to look for is parsed only so that a syntax error is reported; `source.parses`
checks that without building the tree. It may say "not known" where `ast.parse` succeeds (the scan then parses),
never "parses" where `ast.parse` fails, so the scan's findings stay `ast.parse`'s."""

from __future__ import annotations

import pytest

from migrator.engine import scan_file
from migrator.engine.file_scan import ScanOptions
from migrator.engine.source import SYNTAX_ONLY, ParseFailure, parse_python, parses

BROKEN = {
    "indentation": b"def f():\nreturn 1\n",
    "unindent": b"if x:\n        a = 1\n    b = 2\n",
    "tabs and spaces": b"if x:\n\ta = 1\n        b = 2\n",
    "nonlocal at module level": b"nonlocal x\n",
    "nonlocal unbound": b"def f():\n    nonlocal y\n",
    "global after use": b"def f():\n    x = 1\n    global x\n",
    "return outside a function": b"return 1\n",
    "yield outside a function": b"yield 1\n",
    "await outside async": b"def f():\n    await g()\n",
    "break outside a loop": b"break\n",
    "null byte": b"x = 1\x00\n",
    "bad utf-8": b"x = '\xff'\n",
    "bad coding cookie": b"# -*- coding: nonsense -*-\nx = 1\n",
    "latin-1 cookie": b"# -*- coding: latin-1 -*-\nx = '\xe9'\n",
    "python 2 print": b"print 'hello'\n",
    "unclosed bracket": b"x = (1,\n",
    "too many parentheses": b"x = " + b"(" * 201 + b"1" + b")" * 201 + b"\n",
    "too many indents": b"".join(b" " * i + b"if x:\n" for i in range(101)) + b" " * 101 + b"pass\n",
    "duplicate argument": b"def f(a, a):\n    pass\n",
    "star import in a function": b"def f():\n    from os import *\n",
    "annotated global": b"def f():\n    global x\n    x: int = 1\n",
    "invalid escape (a warning only)": b"x = '\\d'\n",
    "fine": b"import os\nx = [i for i in range(3)]\n",
}
# deep expressions around where `ast.parse` gives up building its tree (a `RecursionError`)
DEEP = {f"{kind} {n}": make(n) for n in (500, 1400, 1500, 2900, 2980, 2990, 3000, 5900)
        for kind, make in (("unary", lambda n: b"x = " + b"-" * n + b"1\n"),
                           ("sum", lambda n: b"x = " + b"+".join([b"1"] * n) + b"\n"),
                           ("attribute", lambda n: b"x = a" + b".b" * n + b"\n"),
                           ("call", lambda n: b"x = f" + b"()" * n + b"\n"),
                           ("lambda", lambda n: b"x = " + b"lambda: " * n + b"0\n"),
                           ("default", lambda n: b"x = " + b"lambda a=" * n + b"0" + b": 0" * n + b"\n"))}


@pytest.mark.parametrize("data", list(BROKEN.values()) + list(DEEP.values()), ids=list(BROKEN) + list(DEEP))
def test_parses_only_where_ast_parse_gives_a_module(data):
    if parses(data):
        assert not isinstance(parse_python(data, "m.py"), ParseFailure)


def test_the_check_is_used_where_it_can_be():
    assert parses(BROKEN["fine"]) == SYNTAX_ONLY
    assert not parses(BROKEN["nonlocal at module level"])  # the symbol table's refusal: ask `ast.parse`


def _result(data: bytes, monkeypatch, syntax_only: bool):
    if not syntax_only:
        monkeypatch.setattr(scan_file, "parses", lambda data: False)  # as before: every file parsed
    result = scan_file.scan_bytes(data, "m.py", "python", ScanOptions())
    monkeypatch.undo()
    return result


@pytest.mark.parametrize("data", list(BROKEN.values()) + list(DEEP.values()), ids=list(BROKEN) + list(DEEP))
def test_a_scan_reports_what_parsing_every_file_reports(data, monkeypatch):
    assert _result(data, monkeypatch, True) == _result(data, monkeypatch, False)
