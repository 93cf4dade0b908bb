"""A plan's texts kept in its spool read back exactly as they were planned."""

from __future__ import annotations

from migrator.fix.runner import FileChange
from migrator.fix.spool import Spool


def test_texts_and_bytes_read_back_as_kept() -> None:
    spool = Spool()
    texts = ["", "x = 1\n", "caf\u00e9 \U0001f600\r\n", "undecodable \udcff kept\n", "y" * 300_000]
    kept = [spool.keep(t) for t in texts]
    data = spool.keep(b"\xff\xfeb\x00")
    assert [k.value() for k in kept] == texts
    assert data.value() == b"\xff\xfeb\x00"


def test_a_spooled_change_is_changed_only_when_its_texts_differ() -> None:
    spool = Spool()
    before = spool.keep("import torch\nx.cuda()\n")
    same = spool.keep("import torch\nx.cuda()\n")
    after = spool.keep("import torch\nx.npu()\n")
    assert not FileChange("a.py", before, same).changed
    assert not FileChange("a.py", before, "import torch\nx.cuda()\n").changed
    change = FileChange("a.py", before, after, held_encoded=spool.keep(b"import torch\nx.npu()\n"))
    assert change.changed and change.encoded == b"import torch\nx.npu()\n"
    assert change.diff() == FileChange("a.py", change.before, change.after).diff() != ""
    assert not FileChange("a.py", before, after, error="cannot write").changed
