"""The careful-edit checks of the corpus bench (bench/fix_care.py, issue 39's acceptance): each must see
its failure on a hand-made before/after pair, and nothing on a careful edit."""

from __future__ import annotations

from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"


@pytest.fixture
def care(monkeypatch):
    monkeypatch.syspath_prepend(str(BENCH))
    import fix_care

    return fix_care


def test_a_dropped_comment_is_lost_and_a_moved_one_is_not(care):
    before = "f(a,  # keep\n  b=1,  # gone\n)\n"
    assert care.comments_lost("m.py", before, "f(a,  # keep\n)\n") == ["m.py: # gone"]
    assert care.comments_lost("m.py", before, "f(\n  b=1,  # gone\n  a,  # keep\n)\n") == []


def test_an_import_the_edit_left_unused_is_new_and_one_already_unused_is_not(care):
    pytest.importorskip("ruff")  # the dev extra's linter
    before = "import os\nfrom flash_attn import flash_attn_func\n\nout = flash_attn_func(q, k, v)\n"
    after = "import os\nfrom flash_attn import flash_attn_func\n\nout = _migrate_flash_attn(q, k, v)\n"
    new = care.new_unused_imports([("pkg/m.py", before, after)])
    assert new == ["pkg/m.py: `flash_attn.flash_attn_func` imported but unused"]


def test_a_rewritten_check_that_still_guards_a_cuda_call_is_an_inversion(care):
    after = ("import torch\n\n\nclass T:\n    def __init__(self):\n        self.cuda = torch.npu.is_available()\n\n"
             "    def go(self):\n        if self.cuda and torch.cuda.get_device_capability(0)[0] < 7:\n"
             "            return 1\n")
    assert care.guard_inversions("m.py", after, [6]) == ["m.py:6: guards `torch.cuda.get_device_capability`"]
    assert care.guard_inversions("m.py", after.replace("torch.cuda.get", "torch.npu.get"), [6]) == []
    assert care.guard_inversions("m.py", after, []) == []
