"""The marker search looks at a line only where a whole-text search of the lowered text says it may hold
one: the lines it reports must be those a case-insensitive search of every line reports, also where case
folding changes the text's length (`İ`) or folds a letter onto ASCII (`ſ` is an `s`, `K` a `k`)."""

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
])
def test_marker_lines_are_those_of_a_search_of_every_line(text):
    source = SourceText(text, split_lines(text), "utf-8")
    markers = unattributed("m.py", "python", source, [], set())
    assert [(m.line, m.marker) for m in markers] == _every_line(source)
