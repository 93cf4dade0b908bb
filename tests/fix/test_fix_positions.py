"""The partial position map agrees with libcst's full map wherever it has an answer."""

from __future__ import annotations

import ast
from pathlib import Path

import libcst as cst
import pytest

from migrator.fix import syntax
from migrator.fix.positions import full_positions, node_positions, source_texts

REPO = Path(__file__).resolve().parents[2]
SOURCES = sorted(
    p for folder in ("samples", "tests/fixtures", "tests/golden", "migrator/fix") for p in (REPO / folder).rglob("*.py")
)

TRICKY = '''\
"""doc"""
# header comment

import torch

@torch.no_grad()

# between decorators
@staticmethod
def f(x):
    return x.cuda()
a = 1; b = torch.cuda.is_available()
(
    torch.cuda.empty_cache()
)
class C:
    def g(self):
        pass
    # trailing comment in the block
# dedented comment
if a:
    pass
else:
    torch.cuda.synchronize()
x = 1
class Big:
    """A class long enough to be split into its header and its blocks."""

    @property
    def device(self):
        return torch.device("cuda")

    def step(self, batch):
        if batch is None:
            return None
        elif batch.is_cuda:  # comment
            batch = batch.cuda()
        else:
            batch = batch.to("cuda")
        try:
            torch.cuda.synchronize()
        except (RuntimeError,
                torch.cuda.OutOfMemoryError) as exc:
            raise exc
        finally:
            torch.cuda.empty_cache()
        for i in range(3):
            with torch.cuda.amp.autocast(
                enabled=True,
            ):
                pass
        else:
            while False:
                torch.cuda.synchronize()
        if batch: x = 1
        else: x = 2
        match batch:
            case "cuda":
                pass
        return batch
y = 2'''


def _compare(text: str, work_lines: list[int], partial_expected: bool = False, check_cut: bool = False) -> tuple[int, int]:
    text, _ = syntax.normalise_form_feeds(text)
    module = cst.parse_module(text)
    if check_cut:
        _cut_matches_render(text, module)
    partial = node_positions(module, ast.parse(text), text, work_lines)
    full = full_positions(module).ranges
    assert not (partial_expected and partial.complete), "fell back to the full map"
    for node, where in partial.ranges.items():
        assert full[node] == where, (type(node).__name__, where, full[node])
    skipped = [node for node in full if id(node) in partial.skipped]
    assert len(skipped) == len(partial.skipped)
    for stmt in skipped:
        r = full[stmt]
        assert not any(r.start.line <= line <= r.end.line for line in work_lines)
    return len(partial.ranges), len(skipped)


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(REPO)))
def test_partial_map_matches_libcst(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    try:
        ast.parse(text)
    except SyntaxError:
        pytest.skip("not valid Python on purpose")
    lines = text.count("\n") + 1
    _compare(text, list(range(1, lines + 1, 3)), check_cut=True)


def test_tricky_layouts_every_line() -> None:
    lines = TRICKY.count("\n") + 1
    for line in range(1, lines + 1):
        computed, _ = _compare(TRICKY, [line], partial_expected=True)
        if TRICKY.splitlines()[line - 1].strip() and not TRICKY.splitlines()[line - 1].lstrip().startswith("#"):
            assert computed, f"line {line} holds code but no position was computed"


def test_statements_without_work_are_skipped() -> None:
    computed, skipped = _compare(TRICKY, [11], partial_expected=True)  # inside f only
    assert computed and skipped == len(cst.parse_module(TRICKY).body) - 1
    line = TRICKY.splitlines().index("            batch = batch.cuda()") + 1
    computed, skipped = _compare(TRICKY, [line], partial_expected=True)  # one line deep inside Big
    everything = len(full_positions(cst.parse_module(TRICKY)).ranges)
    assert 0 < computed < everything / 3 and skipped > len(cst.parse_module(TRICKY).body)


@pytest.mark.parametrize("text", [TRICKY, TRICKY + "\n", "\n", "# only a comment\n", "x = 1\r\ny = 2\r\n", "if x:\n    pass\n# end\n"])
def test_render_equals_libcst_code(text: str) -> None:
    from migrator.fix.python_fixer import render

    module = cst.parse_module(text)
    memo: dict = {}
    assert render(module, memo) == module.code == text
    extended = module.with_changes(body=[cst.parse_statement("import torch_npu\n"), *module.body])
    assert render(extended, memo) == extended.code


CUT_LAYOUTS = [TRICKY + "\n", TRICKY + "\n\n# footer comment\n\n", "x = 1\r\ny = 2\r\n", "x = 1\ry = 2\r",
               "#!/usr/bin/env python\n# header\n\n\n# leading\nx = 1\n", "def f():\n    pass\n        # deeper\n  # shallower\nz = 3\n",
               "x = (\n\n  1)\n\x0c\ny = 2\n", "if a:\n    pass\n# end\n"]


def _cut_matches_render(text: str, module: cst.Module | None = None) -> int:
    """How many top-level statements `source_texts` cut from the source; each cut must be the statement's rendering."""
    text, _ = syntax.normalise_form_feeds(text)
    module = module or cst.parse_module(text)
    cut = source_texts(module, ast.parse(text), text)
    for stmt in module.body:
        if id(stmt) in cut:
            assert cut[id(stmt)] == (stmt, module.code_for_node(stmt))
    return len(cut)


@pytest.mark.parametrize("text", CUT_LAYOUTS)
def test_statement_texts_cut_from_the_source_are_their_renderings(text: str) -> None:
    module = cst.parse_module(syntax.normalise_form_feeds(text)[0])  # libcst reads a last lone CR as no newline
    assert _cut_matches_render(text) == (len(module.body) if module.has_trailing_newline else 0)



class _RenameCuda(cst.CSTTransformer):
    """A stand-in fix: `cuda` -> `npu` in every statement with work; statements without any are not walked."""

    def __init__(self, skipped: set[int]):
        super().__init__()
        self.skipped = skipped

    def on_visit(self, node: cst.CSTNode) -> bool:
        return id(node) not in self.skipped

    def leave_Name(self, original: cst.Name, updated: cst.Name) -> cst.Name:
        return updated.with_changes(value="npu") if updated.value == "cuda" else updated


@pytest.mark.parametrize("text", [TRICKY + "\n", TRICKY.replace("class Big:", "class Big:\n    # a comment\n") + "\n"])
def test_rewritten_statements_render_as_libcst_does_with_nested_text_cut(text: str) -> None:
    """A rewritten statement's unchanged nested statements are emitted as their source text: the module
    reads exactly as libcst renders it, whichever line holds the work."""
    from migrator.fix.python_fixer import render

    module, tree = cst.parse_module(text), ast.parse(text)
    cut_any = False
    for line in range(1, text.count("\n") + 1):
        positions = node_positions(module, tree, text, [line])
        fixed = module.visit(_RenameCuda(positions.skipped))
        assert render(fixed, source_texts(module, tree, text), positions.cuts) == fixed.code, line
        cut_any |= bool(positions.cuts)
    assert cut_any, "no nested statement was cut: the test proves nothing"


def test_a_cut_statement_moved_to_another_block_is_rendered() -> None:
    """A statement the fix moves into a deeper block is not emitted at its old indentation."""
    from migrator.fix.python_fixer import render

    text = TRICKY + "\n"
    module, tree = cst.parse_module(text), ast.parse(text)
    line = text.splitlines().index("            batch = batch.cuda()") + 1
    positions = node_positions(module, tree, text, [line])
    big = module.body[-2]
    assert isinstance(big, cst.ClassDef) and positions.cuts
    block = big.body
    assert isinstance(block, cst.IndentedBlock)
    inner = cst.If(test=cst.Name("True"), body=cst.IndentedBlock(body=list(block.body)))
    moved = module.with_changes(body=[*module.body[:-2], big.with_changes(body=block.with_changes(body=[inner])),
                                      module.body[-1]])
    assert render(moved, {}, positions.cuts) == moved.code
