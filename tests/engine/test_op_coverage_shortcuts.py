"""Shortcuts of the op-coverage pass and the prechecks, held to what they stand for: a method's table entry found
by a look-up in the table's names, the scopes walked for a dtype only where one may be proven, the training
dependence found once per file, the module's name counts from one walk (the code replaced is written out here)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from migrator.catalogue.coverage import CoverageError, lookup
from migrator.catalogue.coverage._dtypes import METADATA_APIS
from migrator.catalogue.coverage._table import listed, listed_names
from migrator.catalogue.loader import load_catalogue
from migrator.engine.coverage_checker import _method_entries
from migrator.engine.dtype_evidence import ScopeDtypes, parameters
from migrator.engine.op_workarounds import _Scopes
from migrator.engine.python_checker import PythonChecker
from migrator.engine.scan_file import CheckMemo, ScanOptions, judged_scan
from migrator.engine.scanned import TRAINING_SETS
from tests.engine.helpers import parsed_modules

# methods the table lists, does not list, lists as metadata; and identifiers not in ASCII
METHODS = ["add", "add_", "masked_fill", "index_add_", "frobnicate", "size", "item", "cuda", "npu", "__getitem__",
           "_private", "données", "ｆｕｌｌ"]


@pytest.mark.parametrize("soc", ["A2", "A3"])
def test_a_methods_entry_is_its_full_lookup(soc):
    table_methods = [name[len("torch.Tensor."):] for name in listed_names(soc) if name.startswith("torch.Tensor.")]
    assert table_methods
    entries = _method_entries(soc, None)
    for method in [*METHODS, *table_methods]:
        name = f"torch.Tensor.{method}"
        entry = lookup(name, soc=soc)
        assert entries[method] == (name, entry if entry.known and name not in METADATA_APIS else None), method
        assert (name in listed_names(soc)) == listed(name, soc=soc), method


def test_the_tables_names_refuse_what_listed_refuses():
    for soc, version in (("Z9", None), ("A2", "0.0.1")):
        with pytest.raises(CoverageError) as listed_error:
            listed("torch.Tensor.add", soc=soc, version=version)
        with pytest.raises(CoverageError) as names_error:
            listed_names(soc, version)
        assert str(names_error.value) == str(listed_error.value)
        with pytest.raises(CoverageError):
            _method_entries(soc, version)["add"]


ROOT = Path(__file__).resolve().parents[2]
DTYPE_EDGES = '''
import torch
from torch import zeros as z
idx = torch.zeros(4, dtype=torch.int32)
flags: torch.Tensor = torch.zeros(4, dtype=torch.bool)
hint: torch.Tensor
copy = idx
idx.masked_fill(flags, 0).gather(0, copy)
class Table:
    ids = torch.arange(3)
    ids.index_add_(0, ids, ids)
def f(x, n):
    a = b = torch.zeros(n, dtype=torch.uint8)
    c = x.byte()
    d = c
    e = z(3, dtype=torch.int16)
    g = torch.argsort(x)
    h = torch.tensor([True, False])
    if n:
        i = x.long()
    else:
        i = x.int()
    try:
        j = x.bool()
    except ValueError:
        j = None
    with open(x) as k:
        k = k.short()
    for m in x:
        m = m.long()
    else:
        o = x.char()
    match n:
        case 1:
            p = x.long()
        case _:
            p = x.long()
    (q := x.long())
    r = x.sort(0)
    s: int = x.long()
    t, u = x.long(), x.long()
    v = w = v.long()
    a.masked_fill(c, 0); b.gather(0, d); e.remainder(2); g.kthvalue(1); h.sort(); i.div_(2); j.argsort(); k.sort()
    m.sort(); o.gather(0, o); p.masked_fill_(p, 0); q.sort(); r.sort(); s.sort(); t.sort(); u.sort(); v.sort()
    w.index_add_(0, w, w); idx.masked_fill(a, 1); x.sort()
    def inner():
        a = torch.zeros(2, dtype=torch.int64)
        return a.sort(), c.sort()
    return [a.sort() for a in x], (lambda a: a.sort())(a), a.kthvalue(1)
async def g(x):
    y = x.int()
    async with x as y:
        pass
    return y.sort()
'''


def _old_scope_dtype(checker: PythonChecker, call: ast.Call, name: str) -> str | None:
    """The replaced `_Scopes.dtype`: the scope holding the call walked whatever the name's bindings."""
    line = call.lineno
    holding = [f for f in checker.functions if f.lineno <= line <= (f.end_lineno or f.lineno)]
    scope: ast.AST = max(holding, key=lambda f: f.lineno) if holding else checker.tree
    if isinstance(scope, (ast.FunctionDef, ast.AsyncFunctionDef)) and name in parameters(scope):
        return None
    body = getattr(scope, "body", [])
    if scope is checker.tree:
        body = [s for s in body if not isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))]
    dtypes = ScopeDtypes(scope, body, checker.qualnames)
    return dtypes.dtype(name) if id(call) in dtypes.node_ids else None


def _checked(texts: list[str]) -> list[PythonChecker]:
    catalogue = load_catalogue()
    out = []
    for tree in parsed_modules(texts):
        checker = PythonChecker(catalogue, lambda rule: True, tree)
        checker.visit(tree)
        out.append(checker)
    return out


@pytest.fixture(scope="module")
def corpus() -> list[PythonChecker]:
    paths = sorted([*(ROOT / "samples").rglob("*.py"), *(ROOT / "tests" / "fixtures").rglob("*.py"),
                    *(ROOT / "migrator" / "engine").glob("*.py")])
    return _checked([DTYPE_EDGES, *(path.read_text(encoding="utf-8", errors="replace") for path in paths)])


def test_a_scope_is_walked_for_a_dtype_only_where_one_may_be_proven(corpus):
    """Every call of every module, with every name it reads: the same dtype as the walk of its scope."""
    proven = 0
    for checker in corpus:
        calls = [node for node in ast.walk(checker.tree) if isinstance(node, ast.Call)]
        asked = [(call, name) for call in calls
                 for name in dict.fromkeys(n.id for n in ast.walk(call) if isinstance(n, ast.Name))]
        scopes = _Scopes(checker, {name for _call, name in asked})
        for call, name in asked:
            expected = _old_scope_dtype(checker, call, name)
            assert scopes.dtype(call, name) == expected, (ast.unparse(call), name)
            proven += expected is not None
    assert proven > 20  # the corpus holds proven dtypes, not only unknown ones


def test_the_scans_of_one_file_for_each_training_set_share_its_memo():
    """The training dependence and the training-free hits kept in the memo: every scan the same as one of its own."""
    sensitive = 0
    paths = sorted([*(ROOT / "samples").rglob("*.py"), *(ROOT / "tests" / "fixtures").rglob("*.py")])
    for path in paths:
        data = path.read_bytes()
        memo = CheckMemo()
        for dtypes in ((), *TRAINING_SETS):
            options = ScanOptions(training_dtypes=dtypes)
            shared = judged_scan(data, path.name, "python", options, memo)
            assert shared == judged_scan(data, path.name, "python", options), (path, dtypes)
            sensitive += shared[1]
    assert sensitive  # some file's verdicts depend on the training dtypes
