"""The recall benchmark's oracle (bench/recall_oracle.py) marks CUDA-dependent lines by their tokens alone, never
in comments or docstrings; the benchmark (bench/scan_recall.py) on one pinned sdist (network)."""

from __future__ import annotations

from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"


@pytest.fixture
def oracle(monkeypatch):
    monkeypatch.syspath_prepend(str(BENCH))
    import recall_oracle

    return recall_oracle


def test_oracle_marks_code_lines_and_skips_comments_and_docstrings(oracle):
    text = (
        '"""Runs on cuda: x.cuda()."""\n'          # 1 module docstring
        "import torch  # torch.cuda\n"            # 2 comment only
        "x = t.cuda()\n"                           # 3
        'dev = "cuda:0"\n'                         # 4
        'ranked = f"cuda:{rank}"\n'                # 5
        'os.environ["CUDA_VISIBLE_DEVICES"] = "0"\n'  # 6
        'msg = "CUDA is fast"\n'                   # 7 prose: no whole-string match
        "import deepspeed.ops.adam\n"              # 8
        "def f():\n"                               # 9
        '    """cudnn and nccl."""\n'              # 10 function docstring
        '    return load(sources=["k.cu"])\n'      # 11
    )
    marked = oracle.scan_text(text)
    assert sorted(marked.lines) == [3, 4, 5, 6, 8, 11]
    assert [s.first for s in marked.statements if s.is_import] == [2, 8]


def test_oracle_survives_text_tokenize_refuses(oracle):
    assert oracle.scan_text("x = (\n").lines == {}


@pytest.mark.network
def test_recall_on_one_pinned_sdist(monkeypatch):
    monkeypatch.syspath_prepend(str(BENCH))
    import scan_recall
    from sdists import IndexUnreachable

    try:
        tree = scan_recall.fetch_tree(scan_recall.PINS["nanotron"])
    except IndexUnreachable as exc:
        pytest.skip(f"PyPI unreachable: {exc}")
    result = scan_recall.measure("nanotron", tree, scan_recall.run_scan(tree, scan_recall.REPO))
    assert result.files > 0 and result.counted > 0
    assert result.found + len(result.missed) == result.counted
    assert {m["path"] for m in result.missed} <= {p.relative_to(tree).as_posix() for p in tree.rglob("*.py")}
