"""A fix plan's texts kept in an unnamed temporary file, not in memory.

A plan holds each changed file's text before and after, and the bytes to write; held in memory, a
tree's worth of them grew the process with the tree (3,795 files: 195 MiB before the preview). Each
is written once here as it is planned and read back when asked for (a diff, the preview's scan, the
writer), so the process holds one file's texts at a time. The file is gone when the spool is closed
or collected, or the process ends.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from dataclasses import dataclass, field
from typing import cast

from ..ground.usage_error import UsageError


class SpoolError(UsageError):
    """The temporary file could not take a text (a full or read-only temporary folder): the plan stops
    before anything is written, with the folder and the reason."""

    def __init__(self, exc: OSError):
        super().__init__(f"fix keeps the texts it plans in a temporary file in {tempfile.gettempdir()} "
                         f"(TMPDIR) and could not write there: {exc.strerror or exc}; nothing was changed "
                         "(free space there or set TMPDIR to another folder)")


class Spool:
    def __init__(self) -> None:
        try:
            self._file = tempfile.TemporaryFile(buffering=0)  # noqa: SIM115 - lives as long as the plan
        except OSError as exc:
            raise SpoolError(exc) from exc
        self._end = 0

    def keep(self, value: str | bytes) -> Spooled:
        data = value.encode("utf-8", "surrogatepass") if isinstance(value, str) else value
        at = self._end
        written = 0
        try:
            while written < len(data):
                written += os.pwrite(self._file.fileno(), data[written:], at + written)
        except OSError as exc:
            raise SpoolError(exc) from exc
        self._end += len(data)
        return Spooled(self, at, len(data), isinstance(value, str), hashlib.blake2b(data, digest_size=16).digest())

    def read(self, at: int, length: int) -> bytes:
        chunks = []
        while length > 0:
            chunk = os.pread(self._file.fileno(), length, at)
            if not chunk:
                raise OSError(f"the fix's spool file ended early at byte {at}")
            chunks.append(chunk)
            at, length = at + len(chunk), length - len(chunk)
        return b"".join(chunks)


@dataclass(frozen=True)
class Spooled:
    """One text (or bytes) in a spool; equal to another of the same content."""

    spool: Spool = field(compare=False, repr=False)
    offset: int = field(compare=False)
    length: int
    is_text: bool
    digest: bytes

    def value(self) -> str | bytes:
        data = self.spool.read(self.offset, self.length)
        return data.decode("utf-8", "surrogatepass") if self.is_text else data


def text_of(value: str | Spooled) -> str:
    return cast(str, value.value()) if isinstance(value, Spooled) else value


def bytes_of(value: bytes | Spooled | None) -> bytes | None:
    return cast(bytes, value.value()) if isinstance(value, Spooled) else value


def same_text(a: str | Spooled, b: str | Spooled) -> bool:
    if isinstance(a, Spooled) and isinstance(b, Spooled):
        return a == b
    return text_of(a) == text_of(b)
