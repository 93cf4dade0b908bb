"""The fix record's line map: right for small and large files, and never one quadratic diff."""

from __future__ import annotations

import difflib

import pytest

from migrator.fix import runner
from migrator.fix.line_map import EXACT_GAP, line_map


def _big_file(blocks: int) -> tuple[str, str]:
    """A module of `blocks` functions, three lines of each rewritten, imports added at the top."""
    before, after = ["import torch", ""], ["import torch", "import torch_npu", ""]
    for i in range(blocks):
        body = [f"def step_{i}(model, x):", "    model = model.cuda()", "    x = x.to('cuda')",
                "    torch.cuda.synchronize()", "    return model(x)", ""]
        before += body
        after += [body[0], "    model = model.npu()", "    x = x.to('npu')", "    torch.npu.synchronize()",
                  body[4], ""]
    return "\n".join(before) + "\n", "\n".join(after) + "\n"


def test_small_files_map_as_difflib_does():
    before = "import torch\nx = y.cuda()\n\nz = 1\n"
    after = "import torch\nimport torch_npu\nx = y.npu()\n\nz = 1\n"
    mapping, new = line_map(before, after)
    assert new == after.splitlines()
    assert mapping[1] == (1, 1)
    assert mapping[2] == (3, 3)  # rewritten; the import inserted before it is not part of its edit
    assert mapping[4] == (5, 5)


def test_large_files_map_every_line_to_where_it_went():
    before, after = _big_file(300)
    old, new_lines = before.splitlines(), after.splitlines()
    mapping, new = line_map(before, after)
    assert new == new_lines
    assert len(old) > 4 * EXACT_GAP
    for number, line in enumerate(old, start=1):
        first, last = mapping[number]
        if line.startswith("def step_"):  # unchanged lines keep their text, one line shifted by the import
            assert (first, last) == (number + 1, number + 1) and new_lines[first - 1] == line
        if ".cuda()" in line:
            assert new_lines[first - 1] == line.replace(".cuda()", ".npu()")


@pytest.fixture
def matcher_sizes(monkeypatch):
    """len(a) * len(b) of every SequenceMatcher the line map builds (difflib's cost is up to that)."""
    sizes: list[int] = []
    real = difflib.SequenceMatcher

    class Counting(real):
        def __init__(self, isjunk=None, a="", b="", autojunk=True):
            sizes.append(len(a) * len(b))
            super().__init__(isjunk, a, b, autojunk)

    monkeypatch.setattr(difflib, "SequenceMatcher", Counting)
    return sizes


def test_many_edits_in_a_large_file_are_never_diffed_as_one_block(matcher_sizes):
    before, after = _big_file(1000)  # 6,000 lines, 3,000 of them changed
    mapping, _ = runner._edit_line_map("python", before, after, None)
    assert len(mapping) == before.count("\n")
    assert matcher_sizes, "the map still comes from difflib on the short gaps"
    assert max(matcher_sizes) <= EXACT_GAP * EXACT_GAP
    assert sum(matcher_sizes) < len(before.splitlines()) * 100  # linear in the lines, not their square


def test_an_import_inserted_before_a_huge_edited_line_maps_in_bounded_work():
    """The in-block alignment looks at line ends only: a 4 MB line costs no more than a short one."""
    import difflib

    calls = []
    real = difflib.SequenceMatcher.ratio

    def counting(self):
        calls.append(len(self.a) + len(self.b))
        return real(self)

    difflib.SequenceMatcher.ratio = counting
    try:
        huge = "x = y.cuda()  # " + "a" * 4_000_000
        mapping, _ = line_map(f"import torch\n{huge}\n", f"import torch\nimport torch_npu\n{huge.replace('cuda', 'npu')}\n")
    finally:
        difflib.SequenceMatcher.ratio = real
    assert mapping[2] == (3, 3)
    assert calls and max(calls) <= 4 * 80
