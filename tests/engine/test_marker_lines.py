"""The marker search looks at a line only where a whole-text search of the lowered text (or of the file's UTF-8
bytes, ignoring ASCII case) says it may hold one: the lines it reports must be those a case-insensitive search
of every line reports, also where case folding changes the text's length (`İ`) or folds a letter onto ASCII
(`ſ` is an `s`, `K` a `k`)."""

from __future__ import annotations

import pytest

from migrator.engine.markers import MARKER, unattributed
from migrator.engine.source import SourceText, split_lines


def _every_line(source: SourceText) -> list[tuple[int, str]]:
    found = []
    for number, line in enumerate(source.lines, 1):
        m = MARKER.search(line.split("#", 1)[0])
        if m:
            found.append((number, m.group(0).lower()))
    return found


@pytest.mark.parametrize("text", [
    "import torch\nx = y.cuda()\n",
    "s = 'İİİİ'\nx.cuda()\n",
    "İ = 1; x.Cuda()\r\ny = 2\rz = NCCL\n",
    "from xformerſ import ops\n",
    "name = 'ﬂash'\nfrom flash_attn import f  # cuda\n",
    "a = 'é'\nb = 2\n",
    "x = 'nvte_cuda'; y.cudnn  # apex\nz = 1\nTriton.CUDA.cuda\n",  # several words, one line
    "a\r\nb.cuda()\r\n\r\nNCCL = apex\r\n",
    "",
    "x = 'K' + 'ſ'\ny = CUDAPEX.cudnccl\n\u2028z = cUdA\x0c\n",  # overlapping words, a line break only str sees
    "a\rb.cuda()\r\rTRITON\n",
])
@pytest.mark.parametrize("with_bytes", [False, True])
def test_marker_lines_are_those_of_a_search_of_every_line(text, with_bytes):
    source = SourceText(text, split_lines(text), "utf-8")
    markers = unattributed("m.py", "python", source, [], set(), data=text.encode() if with_bytes else None)
    assert [(m.line, m.marker) for m in markers] == _every_line(source)


def test_the_bytes_search_without_re2(monkeypatch):
    from migrator.engine import markers

    monkeypatch.setattr(markers._MARKER_WORDS, "_built", True)  # as without google-re2: the substring searches
    monkeypatch.setattr(markers._MARKER_WORDS, "_automaton", None)
    text = "x = 'K'\ny = CUDAPEX.cudnccl\r\nz = cUdA\n"
    source = SourceText(text, split_lines(text), "utf-8")
    found = unattributed("m.py", "python", source, [], set(), data=text.encode())
    assert [(m.line, m.marker) for m in found] == _every_line(source) != []
