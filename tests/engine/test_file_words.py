"""The one pass over a file's bytes (`engine/file_words.py`) must answer each step as its own search did: whether a
directive word or a training-dtype candidate occurs, the framework import lines, and a marker line for every marker
word, also where one word starts inside another's match (`tritonoqa`, `halflash_attn`, `from megatronoqa`)."""

from __future__ import annotations

import itertools
import re
from pathlib import Path

import pytest

from migrator.catalogue.coverage._dtypes import TRAINING_WORDS, training_dtypes
from migrator.engine.file_words import file_words
from migrator.engine.markers import MARKER_WORDS, unattributed
from migrator.engine.source import SourceText, decode_python, split_lines
from migrator.engine.suppress import DIRECTIVE_WORDS
from migrator.ground.framework_imports import IMPORT_FRAMEWORK, import_lines, pattern_lines

pytest.importorskip("re2")

ROOT = Path(__file__).resolve().parents[2]
WORDS = [*MARKER_WORDS, *(w.decode() for w in DIRECTIVE_WORDS), *(w.decode() for w in TRAINING_WORDS),
         "bfloat16", "torch.half", ".half()", "import", "from "]
TRICKY = [
    b"", b"\xef\xbb\xbfimport torch  # noqa: DEV001\r\n", b"# -*- coding: latin-1 -*-\nx = '\xe9' # NoQa\n",
    b"a = 1\x0cfrom deepspeed import x\n\tfrom  transformers.x import y\r\nimport accelerate2\n",
    b"x = 'caf\xc3\xa9 cuda'\nfrom megatronoqa import m\n", b"tritonoqa halflash_attn cudnnoqa", b"CUDNNOQA\rMIGRATE",
    b"\x00NUL noqa\n", b"x.half() torch.half xfp16 bf16_ bf16\n", b"import lightning\nimport pytorch_lightning as pl\n",
    "ſ K İ = 'nvte_' # MiGrAtE: ignore\n".encode(), b"\xff\xfe broken utf-8 cuda\nfrom mmengine import x\n",
    b"from transformers_x import y\nfrom transformer_engine import te\n  import   deepspeed\n",
]


def _texts() -> list[bytes]:
    """The tricky inputs, every ordered pair of words glued (and overlapped where one ends as the other starts),
    in three cases, and some of this repository's own files."""
    glued = []
    for a, b in itertools.product(WORDS, repeat=2):
        for case in (str, str.upper, str.title):
            glued.append(case(a + b).encode())
            glued.append(case(a + "\n" + b).encode())
            glued.extend(case(a + b[k:]).encode() for k in range(1, len(b)) if a.endswith(b[:k]))
    own = [p.read_bytes() for p in sorted((ROOT / "migrator" / "engine").glob("*.py"))[:40]]
    return TRICKY + glued + own


def _lines_with(data: bytes, word: bytes) -> set[int]:
    return {data.count(b"\n", 0, m.start()) + 1 for m in re.finditer(re.escape(word), data, re.IGNORECASE)}


def test_each_answer_is_its_own_search():
    for data in _texts():
        words = file_words(data)
        assert words is not None
        assert words.directive == bool(re.search(rb"(?i)noqa|migrate", data)), data
        assert words.training == any(w in data for w in TRAINING_WORDS), data
        assert training_dtypes([data], words.training) == training_dtypes([data]), data
        text = data.decode("utf-8", "replace")
        assert import_lines(data, words.imports) == pattern_lines(text) == import_lines(data), data
        if b"\r" not in data:  # every marker word's line holds a match
            found = {data.count(b"\n", 0, at) + 1 for at in words.starts}
            assert all(_lines_with(data, w.encode()) <= found for w in MARKER_WORDS), data


@pytest.mark.parametrize("data", TRICKY + [b"x = 'cuda\xc3\xa9'\r\ny.cudnnoqa # apex\rz=1\n"])
def test_markers_from_the_one_pass_equal_the_markers_search(data):
    try:
        source = decode_python(data)
    except Exception:  # noqa: BLE001 - not decodable: no markers asked for
        source = SourceText(data.decode("latin-1"), split_lines(data.decode("latin-1")), "latin-1")
    words = file_words(data)
    assert words is not None
    one_pass = unattributed("m.py", "python", source, [], set(), data=data, starts=words.starts)
    assert one_pass == unattributed("m.py", "python", source, [], set(), data=data)
    assert one_pass == unattributed("m.py", "python", source, [], set())


def test_every_import_root_is_searched():
    for root in IMPORT_FRAMEWORK:
        data = f"from {root} import x\nimport {root}.y\nimport {root}z\n".encode()
        words = file_words(data)
        assert words is not None and import_lines(data, words.imports) == ((root, 1), (root, 2))
