"""Writing files back without losing anything: atomic replace, same mode, encoding, BOM, newlines."""

from __future__ import annotations

import os
import stat
import tempfile
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Encoded:
    """How a file's bytes map to text, so the text can be turned back into the same kind of bytes."""

    encoding: str
    bom: bool

    def encode(self, text: str) -> bytes:
        data = text.encode(self.encoding)
        return (b"\xef\xbb\xbf" + data) if self.bom else data


def sniff(data: bytes, encoding: str) -> Encoded:
    bom = data.startswith(b"\xef\xbb\xbf")
    enc = "utf-8" if encoding.lower().replace("_", "-") in ("utf-8-sig", "utf8") else encoding
    return Encoded(enc, bom)


def atomic_write(path: Path, data: bytes) -> None:
    """Replace `path` with `data` in one rename; keeps the file mode. Never leaves a partial file."""
    try:
        mode = stat.S_IMODE(path.stat().st_mode)
    except FileNotFoundError:
        mode = None
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".migrate-tmp")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        if mode is not None:
            os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
