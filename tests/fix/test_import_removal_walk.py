"""The import removal walks only the statements that hold an import: the others stay the very nodes they
were (their text is not rendered again) and their functions keep the scope numbers the removal judges by."""

from __future__ import annotations

import libcst as cst

from migrator.fix import import_removal

BEFORE = '''import torch


def helper(x):
    def inner(y):
        def deeper(z):
            return z
        return deeper(y)
    return inner(x)


class Holder:
    def method(self):
        return 1


def attn(q, k, v):
    from flash_attn import flash_attn_func  # CUDA only
    return flash_attn_func(q, k, v)


def later(q):
    if q:
        from flash_attn import flash_attn_func
    return flash_attn_func(q)
'''
AFTER = BEFORE.replace("return flash_attn_func(q, k, v)", "return npu_attn(q, k, v)")


def _removed(monkeypatch=None):
    before, after = cst.parse_module(BEFORE), cst.parse_module(AFTER)
    new, removed = import_removal.remove_unused_imports(before, after, {"flash_attn_func"})
    return after, new, removed


def test_the_import_that_lost_its_last_use_goes_and_untouched_statements_stay_the_same_nodes():
    after, new, removed = _removed()
    assert removed == {(4, "flash_attn_func")}  # attn is the fifth function: helper, inner, deeper, method, attn
    assert "from flash_attn import flash_attn_func  # CUDA only" not in new.code and "# CUDA only" in new.code
    assert new.code.count("from flash_attn import flash_attn_func") == 1  # later's stays
    assert new.body[1] is after.body[1] and new.body[2] is after.body[2]  # helper, Holder: not walked


def test_the_same_result_as_walking_every_statement(monkeypatch):
    _, pruned, removed = _removed()
    monkeypatch.setattr(import_removal, "_count_functions", lambda body, importless: (True, 0))  # walk them all
    _, walked, walked_removed = _removed()
    assert pruned.code == walked.code and removed == walked_removed
