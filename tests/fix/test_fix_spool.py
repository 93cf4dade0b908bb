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


def test_a_full_temporary_folder_stops_fix_before_any_write(tmp_path, monkeypatch) -> None:
    """The spool's write failing (ENOSPC in TMPDIR) ends fix with one line naming the folder and the
    reason, exit 2, and the tree as it was."""
    import errno
    import os

    from click.testing import CliRunner

    from migrator.cli import main

    source = "import torch\nx = torch.zeros(2).cuda()\n"
    (tmp_path / "train.py").write_text(source)

    def no_space(fd: int, data: bytes, offset: int) -> int:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr("migrator.fix.spool.os.pwrite", no_space)
    result = CliRunner().invoke(main, ["fix", str(tmp_path), "--no-cache"])
    assert result.exit_code == 2, result.output
    assert "temporary file" in result.output and os.strerror(errno.ENOSPC) in result.output
    assert "nothing was changed" in result.output
    assert (tmp_path / "train.py").read_text() == source
    assert sorted(p.name for p in tmp_path.iterdir() if p.name != ".migrate") == ["train.py"]  # its lock only
